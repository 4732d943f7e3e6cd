"""A chat's events in the order they mean, whatever order they arrive in.

python-socketio handles each event of a socket in a task of its own, and Chainlit starts a
chat (``on_chat_start``) in yet another task once the page says ``connection_successful``:
a message sent the moment a page connects (a starter clicked while the server is busy)
could be handled before its chat was set up, and was lost. So:

* a new chat is set up on first use, by whichever handler comes first, once
  (``chat.handlers.this_chat``);
* a resumed chat's first message waits until the resume ran (Chainlit resumes inside its
  ``connection_successful`` handler), at most ``RESUME_WAIT_S``;
* a socket that comes back to its session (a phone changing networks, a proxy restarting)
  runs ``on_reconnect`` in the chat's context: what the chat missed is delivered.

Usage::

    register(on_reconnect=handlers.reconnected)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from chainlit.server import sio
from chainlit.session import WebsocketSession

__all__ = ["RESUME_WAIT_S", "register"]

RESUME_WAIT_S = 10.0


def register(on_reconnect: Callable[[], Awaitable[None]]) -> None:
    """Wrap Chainlit's socket handlers (idempotent)."""
    handlers = sio.handlers["/"]
    if getattr(handlers["connection_successful"], "_orders", False):
        return
    connected, message = handlers["connection_successful"], handlers["client_message"]
    disconnect = handlers["disconnect"]
    settled: dict[str, asyncio.Event] = {}  # by session: its connection_successful ran

    async def connection_successful(sid: str) -> Any:
        session = WebsocketSession.get(sid)
        try:
            result = await connected(sid)  # Chainlit's: sets the chat's context here
            if session is not None and session.restored:
                await on_reconnect()
            return result
        finally:
            if session is not None:
                settled.setdefault(session.id, asyncio.Event()).set()

    async def client_message(sid: str, payload: Any) -> Any:
        session = WebsocketSession.require(sid)
        if session.thread_id_to_resume:
            done = settled.setdefault(session.id, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), RESUME_WAIT_S)
        return await message(sid, payload)

    async def disconnected(sid: str, *reason: Any) -> Any:
        session = WebsocketSession.get(sid)
        if session is not None:
            settled.pop(session.id, None)  # a socket coming back says so again
        return await disconnect(sid)

    connection_successful._orders = True  # type: ignore[attr-defined]
    handlers["connection_successful"] = connection_successful
    handlers["client_message"] = client_message
    handlers["disconnect"] = disconnected
