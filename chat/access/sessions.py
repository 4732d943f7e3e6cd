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
from typing import Any

from ..chainlit_door import Handler
from ..counts import Store
from .peers import ProxyTrust

__all__ = ["ChatCount", "ChatsPerAddress"]

logger = logging.getLogger(__name__)


class ChatCount:
    """Chats open per address over every process of the store, each count kept under the
    process that holds it (``chat.counts.forget`` drops a restarted worker's)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def open(self, address: str, *, most: int) -> bool:
        """Count a chat of ``address``; False (not counted) if it holds ``most`` already."""
        async with self._store.transaction() as tx:
            held = "SELECT SUM(n) FROM counts_chats WHERE address = ?"
            if await tx.total(held, address) >= most:
                return False
            await tx.run(
                "INSERT INTO counts_chats (address, owner, n) VALUES (?, ?, 1) "
                "ON CONFLICT (address, owner) DO UPDATE SET n = counts_chats.n + 1",
                address,
                self._store.owner,
            )
            return True

    async def close(self, address: str) -> None:
        async with self._store.transaction() as tx:
            mine = "UPDATE counts_chats SET n = n - 1 WHERE address = ? AND owner = ?"
            await tx.run(mine, address, self._store.owner)
            await tx.run("DELETE FROM counts_chats WHERE n <= 0")


class ChatsPerAddress:
    """The steps that count chats per address: ``connect`` refuses past ``most``,
    ``disconnect`` gives the place back."""

    def __init__(self, trust: ProxyTrust, most: int, count: ChatCount) -> None:
        self._trust = trust
        self._most = most
        self._open = count
        self._address_of: dict[str, str] = {}

    def connect(self, connect: Handler) -> Handler:
        async def counted_connect(sid: str, environ: dict[str, Any], auth: Any = None) -> Any:
            address = self._trust.address_of_environ(environ)
            if not await self._open.open(address, most=self._most):
                logger.warning("chat refused: %s holds %d chats open already", address, self._most)
                raise ConnectionRefusedError("too many chats open from this address")
            try:
                result = await connect(sid, environ, auth)
            except BaseException:
                await self._open.close(address)  # refused by Chainlit (sign-in): not open
                raise
            self._address_of[sid] = address
            return result

        return counted_connect

    def disconnect(self, disconnect: Handler) -> Handler:
        async def counted_disconnect(sid: str) -> Any:
            address = self._address_of.pop(sid, None)
            if address is not None:
                await self._open.close(address)
            return await disconnect(sid)

        return counted_disconnect
