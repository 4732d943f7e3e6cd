"""The one process (``python -m serve``, ``chainlit run app.py``) closes idle and slow
connections and caps one address's, as the group's HAProxy does: on the real app
(``open_app``: 32 connections an address, headers within 3 s)."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

from testing.chat_client import ChatClient
from testing.servers import AppServer
from testing.visitors import async_http_client, closed, idle_connections, visitor

FLOOD, CAP, TIMEOUT_S = 100, 32, 3.0  # open_app's ERNIE_MAX_CONNECTIONS_PER_ADDRESS, ...


async def slow_headers(url: str, source: str) -> asyncio.StreamReader:
    """A request whose headers never end (a slowloris' first lines)."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(
        parts.hostname, parts.port, local_addr=(source, 0)
    )
    writer.write(f"GET / HTTP/1.1\r\nHost: {parts.netloc}\r\nX-Slow: 1\r\n".encode())
    await writer.drain()
    return reader


async def test_idle_and_slow_connections_cannot_take_the_port(open_app: AppServer) -> None:
    """uvicorn kept 1,200 idle and slow-header connections from one address for ever, and
    at ~20,500 other visitors' connections were reset."""
    url = open_app.url
    flood, refused_at_once = await idle_connections(url, visitor(), FLOOD)
    slow = await slow_headers(url, visitor())
    try:
        async with async_http_client(visitor()) as http:
            started = time.monotonic()
            assert (await http.get(f"{url}/healthz", timeout=5)).status_code == 200
            assert time.monotonic() - started < 2
        async with ChatClient.connect(url, source=visitor()) as chat:
            assert (await chat.send("你好")).error is None
        at_once = [r for r, _ in flood if await closed(r, within_s=0.1)]
        assert refused_at_once + len(at_once) >= FLOOD - CAP, (refused_at_once, len(at_once))
        left = [r for r, _ in flood if r not in at_once]
        assert all([await closed(r, within_s=TIMEOUT_S + 5) for r in left])  # said nothing
        assert await closed(slow, within_s=TIMEOUT_S + 5)  # its headers never ended
    finally:
        for _, writer in flood:
            writer.close()
