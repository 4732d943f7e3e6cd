"""How many chats one client address may hold open when no one signs in.

Chainlit accepts any number of websocket sessions, and each holds its chat's state until
it closes. Without sign-in nobody is accountable for them: an address (a trusted proxy's
forwarded one, ``chat.access.peers``) may hold ``ERNIE_MAX_CHATS_PER_ADDRESS`` at once, and
the next websocket is refused. A closed socket gives its place back at once; its session's
memory is given back ``ERNIE_SESSION_KEEP_MINUTES`` later (kept that long for the socket to
come back: ``chat.runtime``), and how many an address opens a minute is the front door's
(``chat.access.front_door``).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Protocol

from ..chainlit_door import Handler
from .peers import ProxyTrust

__all__ = ["ChatCount", "ChatsPerAddress", "OpenChats"]

logger = logging.getLogger(__name__)


class OpenChats(Protocol):
    """Chats open per address: this process's (``ChatCount``) or a group's
    (``chat.access.shared_limits.SharedChatCount``)."""

    def open(self, address: str, *, most: int) -> bool: ...
    def close(self, address: str) -> None: ...


class ChatCount:
    """Chats open per address in this process."""

    def __init__(self) -> None:
        self._open: Counter[str] = Counter()

    def open(self, address: str, *, most: int) -> bool:
        """Count a chat of ``address``; False (not counted) if it holds ``most`` already."""
        if self._open[address] >= most:
            return False
        self._open[address] += 1
        return True

    def close(self, address: str) -> None:
        self._open[address] -= 1
        if self._open[address] <= 0:
            del self._open[address]


class ChatsPerAddress:
    """The steps that count chats per address: ``connect`` refuses past ``most``,
    ``disconnect`` gives the place back."""

    def __init__(self, trust: ProxyTrust, most: int, count: OpenChats | None = None) -> None:
        self._trust = trust
        self._most = most
        self._open = count or ChatCount()
        self._address_of: dict[str, str] = {}

    def connect(self, connect: Handler) -> Handler:
        async def counted_connect(sid: str, environ: dict[str, Any], auth: Any = None) -> Any:
            address = self._trust.address_of_environ(environ)
            if not self._open.open(address, most=self._most):
                logger.warning("chat refused: %s holds %d chats open already", address, self._most)
                raise ConnectionRefusedError("too many chats open from this address")
            try:
                result = await connect(sid, environ, auth)
            except BaseException:
                self._open.close(address)  # refused by Chainlit (sign-in): not open
                raise
            self._address_of[sid] = address
            return result

        return counted_connect

    def disconnect(self, disconnect: Handler) -> Handler:
        async def counted_disconnect(sid: str) -> Any:
            address = self._address_of.pop(sid, None)
            if address is not None:
                self._open.close(address)
            return await disconnect(sid)

        return counted_disconnect
