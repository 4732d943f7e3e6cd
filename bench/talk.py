"""One visitor's conversation (``bench.traffic.Conversation``), held the way each path is
used: over the app's Socket.IO as a browser tab holds it (a bare engine's:
``bench.raw_engine``).

Usage::

    turns = await socket_conversation(url, visitor, system_prompt="zh")
"""

from __future__ import annotations

import asyncio
import time

from testing.chat_client import ChatClient
from testing.shapes import answer_to
from testing.visitors import visitor

from .openloop import Turn
from .traffic import Conversation

__all__ = ["socket_conversation", "think"]

REPLY_TIMEOUT_S = 600
IN_LINE = "In line: "  # the place-in-line notice (the bench's tabs are English)
PANEL = {"temperature": 0.8, "top_p": 0.8}


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
