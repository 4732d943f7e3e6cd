"""The guides' architecture: Chainlit in front of vLLM's OpenAI-compatible server.

Written the way the guides and most Chainlit + LLM examples write it: one streamed HTTP
request per message, every delta sent to the browser as it arrives. Run by ``bench``
with ``BENCH_VLLM_URL``, ``BENCH_MAX_TOKENS`` and ``BENCH_SYSTEM_PROMPT``.
"""

from __future__ import annotations

import json
import os

import chainlit as cl
import httpx
from httpx_sse import aconnect_sse

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
    async with aconnect_sse(client, "POST", "/v1/chat/completions", json=body) as source:
        async for event in source.aiter_sse():  # the SSE spec's framing, via httpx-sse
            if event.data == "[DONE]":
                continue  # read to the end: httpx's iterators then close in this task
            delta = json.loads(event.data)["choices"][0]["delta"]
            if delta.get("content"):
                await reply.stream_token(delta["content"])
    await reply.send()
