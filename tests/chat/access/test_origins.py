"""Only the app's own pages (and origins the operator names) may drive the chat from a
browser: the websocket and cross-origin HTTP, on the real app (the session's demo app,
and ``signed_app`` for an origin the operator allows)."""

from __future__ import annotations

import httpx
import pytest
import socketio

from testing.accounts import PORTAL, PROXY, named, session_cookie
from testing.chat_client import ChatClient, wait_ready
from testing.engines import DemoApp
from testing.servers import AppServer
from testing.visitors import visitor

EVIL = "https://evil.example"


async def test_a_page_of_another_origin_cannot_open_the_chat(demo_app: DemoApp) -> None:
    url = demo_app.server.url
    await wait_ready(url, 300)
    with pytest.raises(socketio.exceptions.ConnectionError):
        async with ChatClient.connect(url, headers={"Origin": EVIL}):
            pass
    async with ChatClient.connect(url, headers={"Origin": url}) as chat:  # its own page
        assert (await chat.send("你好")).error is None


@pytest.mark.parametrize("method", ["GET", "OPTIONS"])
async def test_cross_origin_http_gets_no_grant(demo_app: DemoApp, method: str) -> None:
    headers = {"Origin": EVIL, "Access-Control-Request-Method": "POST"}
    answer = httpx.request(method, f"{demo_app.server.url}/user", headers=headers, timeout=10)
    assert "access-control-allow-origin" not in answer.headers, answer.headers


async def test_an_origin_the_operator_allows_may_use_the_chat(signed_app: AppServer) -> None:
    preflight = httpx.options(
        f"{signed_app.url}/user",
        headers={"Origin": PORTAL, "Access-Control-Request-Method": "GET"},
        timeout=10,
    )
    assert preflight.headers.get("access-control-allow-origin") == PORTAL
    signed = httpx.post(f"{signed_app.url}/auth/header", headers=named("dave") | PROXY)
    cookie = session_cookie(signed) | {"Origin": PORTAL}
    async with ChatClient.connect(signed_app.url, headers=cookie, source=visitor()) as chat:
        assert (await chat.send("你好")).error is None
