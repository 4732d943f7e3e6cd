"""One chat's state between events: a typed record under one key of Chainlit's session,
passed to the UI explicitly.

A reply's life, and what a dropped socket does to it::

    begin_reply(request_id)    a reply is being written (its engine request)
    ended()                    the engine let the request go (written, stopped or failed)
    dropped() -> tasks         the page's socket went: the tasks that serve a page
                               (the engine's notice, a followed reply) are to be cancelled;
                               the reply goes on (with the history on, for a reload)
    lose_reply()               ... and nothing will show it (no history, or a new chat):
                               the reply being written is stopped, and marked lost
    was_lost(request_id)       its footer then says it was stopped by the page's going
    delivered(reply)           its final form was sent; if the socket was gone, it is kept
    returned() -> (reply, left)  the socket came back: the reply kept for it, and whether
                               a message of it left the line meanwhile (said once)

``last_reply`` is the reply a regenerate answers again (the one with the buttons);
``following`` / ``resumed_reply`` are what a resumed page shows once it has its thread (a
reply still being written, or the last reply's buttons).

Usage::

    state = chat_state()            # this chat's, made on first use
    state.begin_reply(request_id)
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import chainlit as cl

from engine import ChatOptions

from ..conversation import Conversation
from .live import LiveReply

__all__ = ["ChatState", "chat_state"]

KEY = "chat_state"  # the one key of Chainlit's user session this app uses


@dataclass
class ChatState:
    conversation: Conversation | None = None
    options: ChatOptions = field(default_factory=ChatOptions)
    request_id: str | None = None  # the reply being written, or None
    waited_s: float = 0.0  # the next reply's message's time in the app's line
    last_reply: cl.Message | None = None  # the one a regenerate answers again
    gone: bool = False  # the page's socket went and has not come back
    undelivered: cl.Message | None = None  # a final form sent while it was gone
    lost_request: str | None = None  # a reply stopped because nothing would show it
    left_line: bool = False  # a message left the line while the socket was gone
    announcer: asyncio.Task[None] | None = None  # the engine's notices on this page
    following: LiveReply | None = None  # a resumed page: the reply still being written
    follower: asyncio.Future[None] | None = None  # ... followed on this page
    resumed_reply: Mapping[str, Any] | None = None  # ... or the last reply, for its buttons

    def begin_reply(self, request_id: str) -> None:
        self.request_id = request_id

    def ended(self) -> None:
        self.request_id = None

    def dropped(self) -> list[asyncio.Future[None]]:
        """The socket went; the page's tasks to cancel."""
        self.gone = True
        return [task for task in (self.announcer, self.follower) if task is not None]

    def lose_reply(self) -> None:
        self.lost_request = self.request_id

    def was_lost(self, request_id: str) -> bool:
        return self.lost_request == request_id

    def delivered(self, reply: cl.Message) -> None:
        if self.gone:
            self.undelivered = reply

    def returned(self) -> tuple[cl.Message | None, bool]:
        """The socket is back: the final form it missed, and whether a message left the
        line meanwhile; each said once."""
        missed, left = self.undelivered, self.left_line
        self.gone, self.undelivered, self.left_line = False, None, False
        return missed, left

    def replace_last_reply(self, reply: cl.Message | None) -> cl.Message | None:
        """``reply`` is now the last reply; the one before."""
        before, self.last_reply = self.last_reply, reply
        return before


def chat_state() -> ChatState:
    """This chat's state (made on first use)."""
    state = cl.user_session.get(KEY)
    if state is None:
        state = ChatState()
        cl.user_session.set(KEY, state)
    return state  # type: ignore[no-any-return]
