"""Where a request comes from: the client's address, or the one a trusted proxy names.

A proxy's ``X-Forwarded-For`` counts only on requests that carry the proxy's shared
secret (``ERNIE_AUTH_PROXY_SECRET`` in its header): anyone else could name any address.

Usage::

    trust = ProxyTrust(b"x-proxy-secret", b"the secret")    # or ProxyTrust.none()
    trust.address(scope)             # an ASGI request's (the sign-in middleware)
    trust.address_of_environ(env)    # a websocket's, as Chainlit keeps its environ
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["CLIENT_ADDRESS", "REQUEST_USER", "AddressMiddleware", "ProxyTrust"]

CLIENT_ADDRESS: ContextVar[str] = ContextVar("client_address", default="unknown")
# The signed-in user of the HTTP request being handled (chat.auth sets it as Chainlit
# authenticates the request; the history's owner checks read it).
REQUEST_USER: ContextVar[str | None] = ContextVar("request_user", default=None)


@dataclass(frozen=True)
class ProxyTrust:
    """The header and secret a trusted proxy proves itself with (none: trust no proxy)."""

    header: bytes | None
    secret: bytes | None

    def _forwarded(self, headers: Mapping[bytes, bytes]) -> str | None:
        if self.header is None or self.secret is None:
            return None
        if not hmac.compare_digest(headers.get(self.header, b""), self.secret):
            return None
        forwarded = headers.get(b"x-forwarded-for", b"").decode("latin-1")
        return forwarded.split(",")[0].strip() or None

    def address(self, scope: Scope) -> str:
        headers = dict(scope.get("headers") or [])
        client = scope.get("client") or ("unknown", 0)
        return self._forwarded(headers) or str(client[0])

    def address_of_environ(self, environ: Mapping[str, Any]) -> str:
        headers = {
            key[5:].lower().replace("_", "-").encode(): str(value).encode("latin-1")
            for key, value in environ.items()
            if key.startswith("HTTP_")
        }
        return self._forwarded(headers) or str(environ.get("REMOTE_ADDR", "unknown"))


class AddressMiddleware:
    """Sets ``CLIENT_ADDRESS`` for the handlers of each request (sign-in reads it)."""

    def __init__(self, app: ASGIApp, *, trust: ProxyTrust) -> None:
        self.app = app
        self.trust = trust

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            CLIENT_ADDRESS.set(self.trust.address(scope))
            REQUEST_USER.set(None)
        await self.app(scope, receive, send)
