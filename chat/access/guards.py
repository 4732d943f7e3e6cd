"""The HTTP doors in their order, and websocket frames sized for messages.

Every request passes, outermost first: the host check (``chat.access.hosts``: DNS
rebinding), the visitor's address noted (``chat.access.peers``), the security headers put
on its answer (``chat.access.headers``), then the route door (``chat.access.route_door``:
rate, other sites, routes of features that are off, session ids, body size), and only
then Chainlit. Socket.IO's events have their own door (``chat.access.front_door``).

A websocket frame is sized for the longest message the app takes
(``ERNIE_MAX_MESSAGE_CHARS``): a paste ten times that long, JSON-escaped at 6 bytes a
character, still reaches the app and gets its refusal in words (``chat.access.admission``);
anything larger is not read at all: engine.io, and uvicorn's websocket before it
(``serve.web``), drop the connection, and the browser says so.
"""

from __future__ import annotations

import logging

from settings.settings import Settings

from ..chainlit_door import SOCKET_IO_PATH, server_app, size_frames
from ..counts import Store
from .headers import Policy, SecurityHeaders
from .hosts import AllowedHosts, HostGuard
from .peers import AddressMiddleware, ProxyTrust
from .rates import Rate
from .route_door import RouteDoor, RouteRules

__all__ = ["frame_bytes", "register"]

logger = logging.getLogger(__name__)

FRAME_ENVELOPE = 64 << 10  # a message's JSON around its text


def frame_bytes(max_message_chars: int) -> int:
    """The largest websocket frame read: a message of ten times the limit, escaped."""
    return 6 * 10 * max_message_chars + FRAME_ENVELOPE


def register(trust: ProxyTrust, hosts: AllowedHosts, settings: Settings, store: Store) -> None:
    """Put the HTTP doors before every route (idempotent: a reloaded app adds no second
    set), size the frames, and end a socket that answers no ping for
    ``ERNIE_SOCKET_TIMEOUT_S`` (Engine.IO pings every half of it and waits the other half)."""
    size_frames(frame_bytes(settings.max_message_chars), ping_s=settings.socket_timeout_s / 2)
    factories: list[object] = [middleware.cls for middleware in server_app.user_middleware]
    if RouteDoor in factories:
        return
    origins = settings.origin_list
    rate = Rate(store, "requests", per_minute=settings.requests_per_minute)
    rules = RouteRules(trust, origins, rate, body_timeout_s=settings.request_timeout_s)
    server_app.add_middleware(RouteDoor, rules=rules, socket_path=SOCKET_IO_PATH)
    policy = Policy(trust, settings.image_sources, origins)
    server_app.add_middleware(SecurityHeaders, policy=policy)
    server_app.add_middleware(AddressMiddleware, trust=trust)
    server_app.add_middleware(HostGuard, hosts=hosts)  # outermost: checked first
