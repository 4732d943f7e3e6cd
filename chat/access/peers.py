"""Who a visitor is: the address a request comes from (docs/security.md, "Who is who").

* One process: the TCP peer, as the ASGI scope's ``client`` holds it. uvicorn runs
  without its proxy-headers rewrite (``serve.web``), so no header changes it; engine.io's
  WSGI-style environ is not read for it (its ``REMOTE_ADDR`` is ``127.0.0.1`` for every
  websocket).
* Behind a proxy (the group's own HAProxy, or an operator's): the proxy proves itself with
  a shared secret in one header, and names the client in ``X-Forwarded-For``. Both are read
  from the scope's raw headers by their exact names, never from engine.io's environ, which
  merges ``X_Forwarded_For`` (a client's) into the same key. The last entry counts: a
  proxy that appends (nginx's ``$proxy_add_x_forwarded_for``) puts the peer it saw last.

Usage::

    trust = ProxyTrust(b"x-proxy-secret", b"the secret")    # or ProxyTrust.none()
    trust.address(scope)             # an ASGI request's (HTTP or websocket)
    trust.address_of_environ(env)    # a websocket's, as Chainlit keeps engine.io's environ
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["CLIENT_ADDRESS", "REQUEST_USER", "AddressMiddleware", "ProxyTrust", "is_loopback"]

CLIENT_ADDRESS: ContextVar[str] = ContextVar("client_address", default="unknown")
# The signed-in user of the HTTP request being handled (chat.access.sign_in sets it as
# Chainlit authenticates the request; the history's owner checks read it).
REQUEST_USER: ContextVar[str | None] = ContextVar("request_user", default=None)
FORWARDED_FOR = b"x-forwarded-for"


def _values(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    """Every value of the header ``name`` (exact, as ASGI servers lower-case names)."""
    return [value for key, value in headers if key == name]


def _address(text: str) -> str | None:
    """``text`` as an IP address in its canonical form, or None if it is none."""
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        return None


def is_loopback(address: str) -> bool:
    found = _address(address)
    return found is not None and ipaddress.ip_address(found).is_loopback


@dataclass(frozen=True)
class ProxyTrust:
    """The header and secret a trusted proxy proves itself with (none: trust no proxy)."""

    header: bytes | None
    secret: bytes | None

    @classmethod
    def none(cls) -> ProxyTrust:
        return cls(None, None)

    def proven(self, headers: Iterable[tuple[bytes, bytes]]) -> bool:
        """The request came through the trusted proxy: one secret header, and it matches."""
        if self.header is None or self.secret is None:
            return False
        given = _values(headers, self.header)
        return len(given) == 1 and hmac.compare_digest(given[0], self.secret)

    def _forwarded(self, headers: list[tuple[bytes, bytes]]) -> str | None:
        if not self.proven(headers):
            return None
        entries = b",".join(_values(headers, FORWARDED_FOR)).decode("latin-1").split(",")
        return _address(entries[-1])

    def address(self, scope: Scope | Mapping[str, Any]) -> str:
        """The visitor's address: the proxy's word for it when proven, else the peer."""
        headers = list(scope.get("headers") or [])
        client = scope.get("client") or ("unknown", 0)
        return self._forwarded(headers) or str(client[0])

    def _forwarded_value(self, headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
        """The first entry of a forwarding header the proven proxy sent (None: none)."""
        if not self.proven(headers):
            return None
        values = _values(headers, name)
        first = values[0].decode("latin-1").split(",")[0].strip() if values else ""
        return first or None

    def forwarded_origin(self, scope: Scope | Mapping[str, Any]) -> str | None:
        """The origin a proven proxy says the visitor asked for (its scheme and host)."""
        headers = list(scope.get("headers") or [])
        proto = self._forwarded_value(headers, b"x-forwarded-proto")
        host = self._forwarded_value(headers, b"x-forwarded-host")
        host = host or dict(headers).get(b"host", b"").decode("latin-1")
        return f"{proto}://{host}" if proto and host else None

    def https(self, scope: Scope | Mapping[str, Any]) -> bool:
        """The visitor reached the app over TLS: its own or a proven proxy's."""
        headers = list(scope.get("headers") or [])
        proto = self._forwarded_value(headers, b"x-forwarded-proto")
        return scope.get("scheme") in ("https", "wss") or (proto or "").lower() == "https"

    def address_of_environ(self, environ: Mapping[str, Any]) -> str:
        """A websocket's address: engine.io keeps the ASGI scope in its environ."""
        return self.address(environ.get("asgi.scope") or {})


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
