"""The guides' architecture: Chainlit in front of vLLM's OpenAI-compatible server.

Written the way the guides and most Chainlit + LLM examples write it: one streamed HTTP
request per message, every delta sent to the browser as it arrives. Run by ``bench``
with ``BENCH_VLLM_URL``, ``BENCH_MAX_TOKENS`` and ``BENCH_SYSTEM_PROMPT``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator

import chainlit as cl
import httpx

VLLM_URL = os.environ["BENCH_VLLM_URL"]
MAX_TOKENS = int(os.environ["BENCH_MAX_TOKENS"])
SYSTEM_PROMPT = os.environ.get("BENCH_SYSTEM_PROMPT", "")

client = httpx.AsyncClient(base_url=VLLM_URL, timeout=None)


@cl.on_message
async def answer(message: cl.Message) -> None:
    messages = [{"role": "system", "content": SYSTEM_PROMPT}] if SYSTEM_PROMPT else []
    messages.append({"role": "user", "content": message.content})
    body = {
        "model": "bench",
        "messages": messages,
        "stream": True,
        "max_tokens": MAX_TOKENS,
        "ignore_eos": True,  # every path generates the same number of tokens
    }
    reply = cl.Message(content="")
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        async for data in server_sent_events(response):
            delta = json.loads(data)["choices"][0]["delta"]
            if delta.get("content"):
                await reply.stream_token(delta["content"])
    await reply.send()


async def server_sent_events(response: httpx.Response) -> AsyncIterator[bytes]:
    """The data of each event. Split on the blank line SSE defines, not on every Unicode
    line break as text line readers do: model text may hold U+2028 and the like."""
    pending = b""
    async for chunk in response.aiter_bytes():
        *events, pending = (pending + chunk).split(b"\n\n")
        for event in events:
            data = event.removeprefix(b"data: ")
            if data and data != b"[DONE]":
                yield data
