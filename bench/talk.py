"""One visitor's conversation (``bench.traffic.Conversation``), held the way each path is
used: over the app's Socket.IO as a browser tab holds it, or over vLLM's OpenAI API as any
OpenAI client holds it (a bare engine's: ``bench.raw_engine``).

Usage::

    turns = await socket_conversation(url, visitor, system_prompt="zh")
    async with openai_client() as client:
        turns = await openai_conversation(client, url, "system prompt", visitor)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from httpx_sse import SSEError, aconnect_sse

from testing.chat_client import ChatClient
from testing.shapes import answer_to
from testing.visitors import visitor

from .openloop import Turn
from .traffic import Conversation

__all__ = [
    "SERVED",
    "openai_client",
    "openai_conversation",
    "openai_turn",
    "socket_conversation",
    "think",
]

REPLY_TIMEOUT_S = 600
IN_LINE = "In line: "  # the place-in-line notice (the bench's tabs are English)
PANEL = {"temperature": 0.8, "top_p": 0.8}
SERVED = "bench"  # the model's name on the vLLM servers the bench starts


async def think(conversation: Conversation, turn: int) -> None:
    """The visitor reads the last reply and types the next message."""
    if turn:
        await asyncio.sleep(conversation.think_s[turn - 1])


async def socket_conversation(
    url: str, conversation: Conversation, *, system_prompt: str | None, panel: bool = True
) -> list[Turn]:
    """The conversation in a tab of its own, from an address of its own; its replies'
    length set in the settings panel (``panel``: the app has one)."""
    turns = []
    async with ChatClient.connect(url, source=visitor(), settle=panel) as chat:
        if panel:
            values = PANEL | {
                "max_tokens": conversation.reply_tokens,
                "system_prompt": system_prompt,
            }
            await chat.change_settings(values)
        for index, question in enumerate(conversation.questions):
            await think(conversation, index)
            sent, mark = time.monotonic(), len(chat.messages)
            reply = await answer_to(chat, question, REPLY_TIMEOUT_S)
            if reply is None:
                turns.append(Turn(sent, None, None, (), conversation.reply_tokens, "no reply"))
                continue
            frames, tokens = tuple(reply.frame_at), conversation.reply_tokens
            last = frames[-1] if frames else None
            waited = any(IN_LINE in text for text in chat.messages[mark:])
            turns.append(
                Turn(reply.sent_at, reply.first_text_at, last, frames, tokens, reply.error, waited)
            )
    return turns


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
