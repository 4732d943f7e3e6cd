"""Which web pages may drive the chat: the app's own origin, and those the operator names.

Chainlit allows every origin with credentials over HTTP (``allow_origins = ["*"]``) and
turns python-socketio's origin check off, so any page a visitor opened could chat through
the visitor's browser. Here the websocket accepts the app's own origin (as the request's
host names it) and ``ERNIE_ALLOWED_ORIGINS``; HTTP answers cross-origin requests only for
``ERNIE_ALLOWED_ORIGINS``. Clients that send no ``Origin`` (not browsers) are not asked.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..chainlit_door import check_socket_origins, set_cors_origins

__all__ = ["register"]

logger = logging.getLogger(__name__)


def _own_origins(environ: Mapping[str, Any]) -> set[str]:
    """The origin a same-site page has: the host it asked for (also behind a proxy)."""
    host, scheme = environ.get("HTTP_HOST"), environ.get("wsgi.url_scheme", "http")
    if not host:
        return set()
    own = {f"{scheme}://{host}"}
    forwarded_host = str(environ.get("HTTP_X_FORWARDED_HOST", host)).split(",")[0].strip()
    forwarded_scheme = str(environ.get("HTTP_X_FORWARDED_PROTO", scheme)).split(",")[0].strip()
    return own | {f"{forwarded_scheme}://{forwarded_host}"}


def register(allowed: list[str]) -> None:
    """Check the origin of websockets and of cross-origin HTTP requests."""
    allowed_set = set(allowed)

    def accepts(origin: str | None, environ: Mapping[str, Any]) -> bool:
        if origin is None or origin in allowed_set or origin in _own_origins(environ):
            return True
        logger.warning("websocket refused: origin %r is not allowed", origin)
        return False

    check_socket_origins(accepts)
    set_cors_origins(allowed)
