"""How many chats one client address may hold open when no one signs in.

Chainlit accepts any number of websocket sessions, and each holds its chat's state until
it closes. Without sign-in nobody is accountable for them: an address (a trusted proxy's
forwarded one, ``chat.access.peers``) may hold ``ERNIE_MAX_CHATS_PER_ADDRESS`` at once, and
the next websocket is refused. Closed sessions give their place back at once (Chainlit
drops what a closed session held: its ``user_session``).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Protocol

from chainlit.server import sio

from .peers import ProxyTrust

__all__ = ["ChatCount", "OpenChats", "register"]

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


def register(trust: ProxyTrust, most: int, count: OpenChats | None = None) -> None:
    """Wrap Chainlit's connect and disconnect handlers with the count (idempotent)."""
    handlers = sio.handlers["/"]
    if getattr(handlers["connect"], "_counts_chats", False):
        return
    connect, disconnect = handlers["connect"], handlers["disconnect"]
    open_chats = count or ChatCount()
    address_of: dict[str, str] = {}

    async def counted_connect(sid: str, environ: dict[str, Any], auth: Any = None) -> Any:
        address = trust.address_of_environ(environ)
        if not open_chats.open(address, most=most):
            logger.warning("chat refused: %s holds %d chats open already", address, most)
            raise ConnectionRefusedError("too many chats open from this address")
        try:
            result = await connect(sid, environ, auth)
        except BaseException:
            open_chats.close(address)  # refused by Chainlit (sign-in): not open
            raise
        address_of[sid] = address
        return result

    async def counted_disconnect(sid: str, *reason: Any) -> Any:
        address = address_of.pop(sid, None)
        if address is not None:
            open_chats.close(address)
        return await disconnect(sid)

    counted_connect._counts_chats = True  # type: ignore[attr-defined]
    handlers["connect"], handlers["disconnect"] = counted_connect, counted_disconnect
