"""No upload and no oversized body costs the server disk or memory: it answers before
reading them, on the real app (the session's demo app)."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx

from testing.chat_client import ChatClient, wait_ready
from testing.engines import DemoApp

UPLOAD = 50 * 2**20  # a file announced as 50 MiB, of which only the first bytes are sent


def announce(url: str, path: str, length: int, content_type: str) -> str:
    """Send a request's head and a few bytes of its body; the status line the server
    answers within 10 s (a server reading the whole body first answers nothing)."""
    parts = urlsplit(url)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {length}\r\n\r\n"
    )
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as conn:
        conn.sendall(head.encode() + b"--b\r\n" + b"x" * 1000)
        return conn.recv(4096).decode(errors="replace").split("\r\n")[0]


async def test_an_upload_is_refused_before_its_body_is_read(demo_app: DemoApp) -> None:
    url = demo_app.server.url
    await wait_ready(url, 300)
    status = announce(url, "/project/file?session_id=x", UPLOAD, "multipart/form-data; boundary=b")
    assert status.startswith("HTTP/1.1 403"), status


async def test_a_body_larger_than_any_route_takes_is_refused_at_once(demo_app: DemoApp) -> None:
    url = demo_app.server.url
    await wait_ready(url, 300)
    assert announce(url, "/project/threads", UPLOAD, "application/json").startswith("HTTP/1.1 413")
    chunks = (b"[" + b"0," * 600_000 + b"0]",)  # 1.2 MB without a length: counted as it comes
    answer = httpx.post(f"{url}/project/threads", content=iter(chunks), timeout=10)
    assert answer.status_code in (400, 413)  # the read stops at the limit
    assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200  # still serving


async def test_a_paste_too_big_for_a_default_frame_gets_words_not_a_dropped_socket(
    demo_app: DemoApp,
) -> None:
    """200,000 Chinese characters, JSON-escaped by the client: 1.2 MB, past engine.io's
    default 1 MB frame (the socket was dropped and the user told nothing)."""
    url = demo_app.server.url
    await wait_ready(url, 300)
    async with ChatClient.connect(url) as chat:
        refused = await chat.send("长" * 200_000, timeout_s=60)
        assert refused.error is not None and "200,000 characters" in refused.error
        assert (await chat.send("你好", timeout_s=120)).error is None  # the chat goes on
