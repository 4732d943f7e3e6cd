"""One visitor's conversation (``bench.traffic.Conversation``), held the way each path is
used: over the app's Socket.IO as a browser tab holds it, or with a bare engine, the
bench keeping the history as the app would.

Usage::

    turns = await socket_conversation(url, visitor, system_prompt="zh")
    turns = await engine_conversation(llm, builder, request_defaults, visitor)
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from vllm import SamplingParams
from vllm.inputs import TokensPrompt
from vllm.sampling_params import RequestOutputKind
from vllm.v1.engine.async_llm import AsyncLLM

from engine.prompt import PromptBuilder
from engine.prompt import Turn as HistoryTurn
from testing.chat_client import ChatClient
from testing.shapes import answer_to
from testing.visitors import visitor

from .openloop import Turn
from .traffic import Conversation

__all__ = ["engine_conversation", "socket_conversation"]

REPLY_TIMEOUT_S = 600
PANEL = {"temperature": 0.8, "top_p": 0.8}


async def _think(conversation: Conversation, turn: int) -> None:
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
            await _think(conversation, index)
            sent = time.monotonic()
            reply = await answer_to(chat, question, REPLY_TIMEOUT_S)
            if reply is None:
                turns.append(Turn(sent, None, None, (), conversation.reply_tokens, "no reply"))
                continue
            frames, tokens = tuple(reply.frame_at), conversation.reply_tokens
            last = frames[-1] if frames else None
            turns.append(
                Turn(reply.sent_at, reply.first_text_at, last, frames, tokens, reply.error)
            )
    return turns


async def engine_conversation(
    llm: AsyncLLM, builder: PromptBuilder, defaults: dict[str, Any], conversation: Conversation
) -> list[Turn]:
    """The conversation straight to an engine, its history kept here; ``defaults``: the
    system prompt and the model's sampling defaults, as the app sends them."""
    history: list[HistoryTurn] = []
    system, sampling = defaults["system_prompt"], defaults["sampling"]
    turns = []
    for index, question in enumerate(conversation.questions):
        await _think(conversation, index)
        tokens = conversation.reply_tokens
        prompt = builder.build(history, question, system_prompt=system, reply_budget=tokens)
        delta = RequestOutputKind.DELTA
        params = SamplingParams(max_tokens=tokens, ignore_eos=True, output_kind=delta, **sampling)
        sent, frames, text = time.monotonic(), [], []
        request = TokensPrompt(prompt_token_ids=prompt.token_ids)
        async for output in llm.generate(request, params, f"bench-{os.urandom(8).hex()}"):
            if output.outputs[0].token_ids:
                frames.append(time.monotonic())
                text.append(output.outputs[0].text)
        history += [HistoryTurn("user", question), HistoryTurn("assistant", "".join(text))]
        first, last = (frames[0], frames[-1]) if frames else (None, None)
        turns.append(Turn(sent, first, last, tuple(frames), tokens))
    return turns
