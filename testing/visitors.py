"""Visitors who come from addresses of their own, as real ones do.

Linux answers on every address of 127.0.0.0/8, and a client may bind its socket to any of
them: each visitor a test makes speaks from a loopback address no other visitor of the
session has (127.0.1.1, 127.0.1.2, ...), so per-address limits see them as different
people, and a test's visitors never meet another test's counts.

Usage::

    who = visitor()                                  # "127.0.1.7": new each time
    async with ChatClient.connect(url, source=who) as chat: ...
    with http_client(who) as http: http.get(f"{url}/readyz")
    idle = await idle_connections(url, who, 300)     # sockets that never say a word
"""

from __future__ import annotations

import asyncio
import itertools
from urllib.parse import urlsplit

import httpx

__all__ = [
    "CLAIMS",
    "async_http_client",
    "closed",
    "http_client",
    "idle_connections",
    "visitor",
    "visitors_from",
]

# Every way a client could name another address for itself (none is the trusted proxy's).
CLAIMS = [
    {"X-Forwarded-For": "10.7.0.1"},
    {"X_Forwarded_For": "10.7.0.2"},
    {"Forwarded": "for=10.7.0.3", "X-Real-IP": "10.7.0.4"},
    {"X-Proxy-Secret": "guess", "X-Forwarded-For": "10.7.0.5"},
    {"X_Proxy_Secret": "guess", "X_Forwarded_For": "10.7.0.6"},
]
_numbers = itertools.count(256 + 1)  # 127.0.1.1 onward: 127.0.0.x stay for the servers


def visitor() -> str:
    """A loopback address no visitor of this session has had."""
    while True:
        number = next(_numbers)
        if number % 256 not in (0, 255):
            return f"127.{number >> 16 & 255}.{number >> 8 & 255}.{number & 255}"


def visitors_from(block: int) -> None:
    """This process's visitors from 127.``block``.0.1 on: each client process of a
    benchmark (``bench.clients``) its own addresses."""
    global _numbers
    _numbers = itertools.count((block & 255) << 16 | 1)


def http_client(source: str, **options: object) -> httpx.Client:
    """An HTTP client that speaks from ``source``."""
    transport = httpx.HTTPTransport(local_address=source)
    return httpx.Client(transport=transport, timeout=10, **options)  # type: ignore[arg-type]


def async_http_client(source: str, **options: object) -> httpx.AsyncClient:
    """An asynchronous HTTP client that speaks from ``source``."""
    transport = httpx.AsyncHTTPTransport(local_address=source)
    return httpx.AsyncClient(transport=transport, timeout=10, **options)  # type: ignore[arg-type]


async def idle_connections(
    url: str, source: str, count: int
) -> tuple[list[tuple[asyncio.StreamReader, asyncio.StreamWriter]], int]:
    """Try ``count`` TCP connections to ``url``'s port from ``source`` that send nothing:
    those opened, and how many the server refused (reset while connecting)."""
    parts = urlsplit(url)
    opened, refused = [], 0
    for _ in range(count):
        try:
            opened.append(
                await asyncio.open_connection(parts.hostname, parts.port, local_addr=(source, 0))
            )
        except ConnectionError:
            refused += 1
    return opened, refused


async def closed(reader: asyncio.StreamReader, *, within_s: float) -> bool:
    """Whether the server closed the connection (within ``within_s``)."""
    try:
        async with asyncio.timeout(within_s):
            while await reader.read(4096):
                pass  # a proxy's 408 before it closes an idle connection
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return True
