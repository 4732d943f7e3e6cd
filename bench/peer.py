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
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from engine.model.system_prompts import resolve_system_prompt
from engine.plan.plan import Plan
from testing.background import environ
from testing.servers import Server

from .clients import Talker
from .measure import LoadResult, Loads, ProcessWatch, ReplyTiming, measure_loads, timed
from .openloop import OpenLoop, RateResult, sweep
from .paths import PROMPT, READY_TIMEOUT_S, VllmServer
from .talk import SERVED, openai_client, openai_turn

__all__ = [
    "peer_flags",
    "peer_server",
    "vllm_path",
]


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
