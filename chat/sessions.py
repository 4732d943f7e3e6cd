"""How many chats one client address may hold open when no one signs in.

Chainlit accepts any number of websocket sessions, and each holds its chat's state until
it closes. Without sign-in nobody is accountable for them: an address (a trusted proxy's
forwarded one, ``chat.addresses``) may hold ``ERNIE_MAX_CHATS_PER_ADDRESS`` at once, and
the next websocket is refused. Closed sessions give their place back at once (Chainlit
drops what a closed session held: its ``user_session``).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from chainlit.server import sio

from .addresses import ProxyTrust

__all__ = ["register"]

logger = logging.getLogger(__name__)


def register(trust: ProxyTrust, most: int) -> None:
    """Wrap Chainlit's connect and disconnect handlers with the count (idempotent)."""
    handlers = sio.handlers["/"]
    if getattr(handlers["connect"], "_counts_chats", False):
        return
    connect, disconnect = handlers["connect"], handlers["disconnect"]
    open_chats: Counter[str] = Counter()
    address_of: dict[str, str] = {}

    async def counted_connect(sid: str, environ: dict[str, Any], auth: Any = None) -> Any:
        address = trust.address_of_environ(environ)
        if open_chats[address] >= most:
            logger.warning("chat refused: %s holds %d chats open already", address, most)
            raise ConnectionRefusedError("too many chats open from this address")
        result = await connect(sid, environ, auth)
        open_chats[address] += 1
        address_of[sid] = address
        return result

    async def counted_disconnect(sid: str, *reason: Any) -> Any:
        address = address_of.pop(sid, None)
        if address is not None:
            open_chats[address] -= 1
            if open_chats[address] <= 0:
                del open_chats[address]
        return await disconnect(sid)

    counted_connect._counts_chats = True  # type: ignore[attr-defined]
    handlers["connect"], handlers["disconnect"] = counted_connect, counted_disconnect
