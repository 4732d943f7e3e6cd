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
  runs ``on_reconnect`` in the chat's context: what the chat missed is delivered;
* a resumed chat runs ``on_resumed`` once Chainlit sent the page its thread (what the
  page shows after it is not overwritten by the thread): a reply being written is followed.

Usage (``chat.chainlit_door.wire`` wires the steps)::

    arrival = Arrival(on_reconnect=handlers.reconnected, on_resumed=handlers.resumed)
    {"connection_successful": [arrival.connected], "client_message": [arrival.message],
     "disconnect": [arrival.disconnected]}
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from .chainlit_door import Handler, WebsocketSession

__all__ = ["RESUME_WAIT_S", "Arrival"]

RESUME_WAIT_S = 10.0


class Arrival:
    """The steps that put a chat's events in their order."""

    def __init__(
        self, on_reconnect: Callable[[], Awaitable[None]], on_resumed: Callable[[], Awaitable[None]]
    ) -> None:
        self._on_reconnect, self._on_resumed = on_reconnect, on_resumed
        self._settled: dict[str, asyncio.Event] = {}  # by session: connection_successful ran

    def connected(self, connected: Handler) -> Handler:
        """``connection_successful``: a resumed chat's messages wait for it; a socket back
        to its session runs ``on_reconnect``."""

        async def connection_successful(sid: str) -> Any:
            session = WebsocketSession.get(sid)
            try:
                result = await connected(sid)  # Chainlit's: sets the chat's context here
                if session is not None and session.restored:
                    await self._on_reconnect()
                elif session is not None and session.thread_id_to_resume:
                    await self._on_resumed()
                return result
            finally:
                if session is not None:
                    self._settled.setdefault(session.id, asyncio.Event()).set()

        return connection_successful

    def message(self, message: Handler) -> Handler:
        """``client_message``: a resumed chat's first message waits until the resume ran."""

        async def client_message(sid: str, payload: Any) -> Any:
            session = WebsocketSession.require(sid)
            if session.thread_id_to_resume:
                done = self._settled.setdefault(session.id, asyncio.Event())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), RESUME_WAIT_S)
            return await message(sid, payload)

        return client_message

    def disconnected(self, disconnect: Handler) -> Handler:
        """``disconnect``: a socket coming back says ``connection_successful`` again."""

        async def disconnected(sid: str, *reason: Any) -> Any:
            session = WebsocketSession.get(sid)
            if session is not None:
                self._settled.pop(session.id, None)
            return await disconnect(sid)  # Chainlit's takes no reason

        return disconnected
