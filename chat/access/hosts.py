"""Which host names the app answers to: a guard against DNS rebinding.

A page served from another name whose DNS later points at 127.0.0.1 can reach an app bound
to localhost from the visitor's own browser, and the browser sends that other name as
``Host``. So HTTP requests and websockets are answered only for the names the app is
reached by: the address it listens on, the loopback names, and ``ERNIE_ALLOWED_HOSTS``.
An app that listens on every address (``0.0.0.0``, as in the image) cannot know its names:
it answers every name unless the operator lists them. Requests with no ``Host`` (HAProxy's
health checks, HTTP/1.0 tools) are not browsers and pass.

Usage::

    hosts = AllowedHosts.of("127.0.0.1", ["chat.example.com"])
    hosts.allows(b"localhost:8000")     # True
    app.add_middleware(HostGuard, hosts=hosts)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["AllowedHosts", "HostGuard"]

logger = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
EVERY_ADDRESS = frozenset({"", "0.0.0.0", "::"})


def host_name(value: str) -> str:
    """A ``Host`` header's name: without its port, brackets or a trailing dot."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0].rstrip(".")


@dataclass(frozen=True)
class AllowedHosts:
    names: frozenset[str] | None  # None: every name

    @classmethod
    def of(cls, bound: str, listed: list[str]) -> AllowedHosts:
        if bound.strip() in EVERY_ADDRESS and not listed:
            return cls(None)
        return cls(LOOPBACK_NAMES | {host_name(bound)} | {host_name(n) for n in listed})

    def allows(self, host: bytes | None) -> bool:
        if self.names is None or host is None:
            return True
        return host_name(host.decode("latin-1")) in self.names


class HostGuard:
    """Answers 421 to an HTTP request for a name not allowed, and refuses its websocket."""

    def __init__(self, app: ASGIApp, *, hosts: AllowedHosts) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        host = dict(scope.get("headers") or []).get(b"host")
        if self.hosts.allows(host):
            return await self.app(scope, receive, send)
        logger.warning("refused a request for host %.80r (ERNIE_ALLOWED_HOSTS)", host)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return None
        body = b"this server does not answer to that host name (its operator lists names in "
        body += b"ERNIE_ALLOWED_HOSTS)\n"
        headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 421, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return None
