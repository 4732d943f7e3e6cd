"""The ``vllm`` path: what an operator would run instead, ``vllm serve`` with its own
defaults (the same model, ``max_model_len`` and memory share, nothing else set: vLLM
sizes its batch for the device itself), driven over its OpenAI API with the same loads
and open-loop arrivals as every other path, each reply streamed.

The guides' set-up (``http``: a minimal Chainlit app over streaming HTTP) talks to the
same server: the guides start ``vllm serve`` with its defaults too.

Usage::

    async with peer_server(plan, log) as peer:
        await vllm_path(peer, plan, loads, open_loop)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import SSEError, aconnect_sse

from engine.model.system_prompts import resolve_system_prompt
from engine.vllm_door.plan import Plan
from testing.background import environ
from testing.servers import Server

from .clients import Talker
from .measure import LoadResult, Loads, ProcessWatch, ReplyTiming, measure_loads, timed
from .openloop import OpenLoop, RateResult, Turn, sweep
from .paths import PROMPT, READY_TIMEOUT_S, VllmServer
from .talk import REPLY_TIMEOUT_S, think
from .traffic import Conversation

__all__ = [
    "openai_client",
    "openai_conversation",
    "openai_turn",
    "peer_flags",
    "peer_server",
    "vllm_path",
]

SERVED = "bench"


def peer_flags(plan: Plan) -> list[str]:
    """``vllm serve``'s flags for the app's model, context and memory, and nothing else."""
    settings = plan.settings
    flags = ["--model", settings.model, "--max-model-len", str(settings.max_model_len)]
    flags += ["--gpu-memory-utilization", str(plan.memory_share)]
    if settings.tokenizer:
        flags += ["--tokenizer", settings.tokenizer]
    if settings.load_format != "auto":  # dummy weights: the benchmark's real architecture
        flags += ["--load-format", settings.load_format]
    if settings.kv_cache_gb is not None:  # the CPU runs size the KV cache, not the share
        flags += ["--kv-cache-memory-bytes", str(int(settings.kv_cache_gb * (1 << 30)))]
    return flags


@contextlib.asynccontextmanager
async def peer_server(plan: Plan, log: Path, api_servers: int = 1) -> AsyncIterator[VllmServer]:
    """``vllm serve`` with its defaults (and ``api_servers`` API processes), until the block
    ends."""
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", *peer_flags(plan)]
    if api_servers > 1:
        command += ["--api-server-count", str(api_servers)]
    command += ["--port", "{port}", "--served-model-name", SERVED, "--disable-uvicorn-access-log"]
    with Server.started(command, environ(), log) as server:
        await asyncio.to_thread(server.wait, "/health", READY_TIMEOUT_S)
        yield VllmServer(server.url, (server.process.pid,))


@contextlib.asynccontextmanager
async def openai_client() -> AsyncIterator[httpx.AsyncClient]:
    """An OpenAI API client for the run's replies. Idle connections close before vLLM's
    server closes them (its keep-alive: 5 s): a turn after a long think sent on one the
    server had just closed failed (1 in 114 at 4/s)."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=1024, keepalive_expiry=4)
    timeout = httpx.Timeout(REPLY_TIMEOUT_S, connect=30)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        yield client


async def openai_turn(
    client: httpx.AsyncClient, url: str, messages: list[dict[str, str]], tokens: int
) -> tuple[Turn, str]:
    """One streamed chat completion of exactly ``tokens`` tokens: as the client saw it,
    and its text."""
    body = {"model": SERVED, "messages": messages, "max_tokens": tokens, "stream": True}
    body |= {"ignore_eos": True}  # every reply runs to its length, as on the other paths
    sent, frames, text = time.monotonic(), [], []
    try:  # httpx-sse, as the remote engine reads it: a reply's text may hold U+2028, which
        # splits a line for str.splitlines (httpx's aiter_lines), not for server-sent events
        async with aconnect_sse(client, "POST", f"{url}/v1/chat/completions", json=body) as sse:
            sse.response.raise_for_status()
            async for event in sse.aiter_sse():
                delta = _delta(event.data)
                if delta:
                    frames.append(time.monotonic())
                    text.append(delta)
    except (httpx.HTTPError, SSEError, ValueError) as exc:
        return Turn(sent, None, None, (), tokens, f"{type(exc).__name__}: {exc}"), ""
    first, last = (frames[0], frames[-1]) if frames else (None, None)
    return Turn(sent, first, last, tuple(frames), tokens), "".join(text)


def _delta(data: str) -> str | None:
    """The text of one server-sent event of a streamed completion."""
    if data == "[DONE]":
        return None
    choices = json.loads(data).get("choices") or [{}]
    content: Any = (choices[0].get("delta") or {}).get("content")
    return content if isinstance(content, str) else None


async def openai_conversation(
    client: httpx.AsyncClient, url: str, system: str, conversation: Conversation
) -> list[Turn]:
    """The conversation, its history kept here as any OpenAI client keeps it."""
    messages = [{"role": "system", "content": system}] if system else []
    turns = []
    for index, question in enumerate(conversation.questions):
        await think(conversation, index)
        messages.append({"role": "user", "content": question})
        turn, text = await openai_turn(client, url, messages, conversation.reply_tokens)
        messages.append({"role": "assistant", "content": text})
        turns.append(turn)
    return turns


async def _burst(
    client: httpx.AsyncClient, url: str, system: str, tokens: int, chats: int
) -> list[ReplyTiming]:
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": PROMPT})
    turns = await asyncio.gather(
        *(openai_turn(client, url, messages, tokens) for _ in range(chats))
    )
    timings = []
    for turn, _ in turns:
        if not turn.answered or turn.first_at is None or turn.ended_at is None:
            raise RuntimeError(f"vllm: a request failed: {turn.error}")
        timings.append(ReplyTiming(turn.sent_at, turn.first_at, turn.ended_at, len(turn.frame_at)))
    return timings


async def vllm_path(
    peer: VllmServer, plan: Plan, loads: Loads, open_loop: OpenLoop | None, path: str = "vllm"
) -> tuple[list[LoadResult], list[RateResult]]:
    """The closed loads, then the open loop's rates, on ``vllm serve`` with its defaults
    (``path``: ``vllm``, or ``vllm-aN`` with N API servers)."""
    system = resolve_system_prompt(plan.settings.system_prompt)
    watch = ProcessWatch(*peer.pids)
    try:
        async with openai_client() as client:
            burst = functools.partial(_burst, client, peer.url, system, loads.reply_tokens)
            closed = await measure_loads(path, loads, watch, timed(watch, burst))
        if open_loop is None:
            return closed, []
        run = open_loop.runner(Talker("openai", (peer.url,), system))
        return closed, await sweep(path, run, open_loop, watch.cpu_s)
    finally:
        watch.close()
