"""The app answers only to the names it is reached by: a page served from another name
whose DNS was pointed at 127.0.0.1 (DNS rebinding) gets nothing from it, over HTTP or the
websocket (``open_app`` listens on 127.0.0.1)."""

from __future__ import annotations

import httpx
import pytest
import socketio

from chat.access.hosts import AllowedHosts
from testing.chat_client import ChatClient
from testing.servers import AppServer
from testing.visitors import visitor


def test_the_allowed_names_follow_the_listening_address() -> None:
    local = AllowedHosts.of("127.0.0.1", [])
    assert local.allows(b"localhost:8000") and local.allows(b"127.0.0.1") and local.allows(None)
    assert local.allows(b"[::1]:8000") and not local.allows(b"evil.example:8000")
    listed = AllowedHosts.of("0.0.0.0", ["chat.example.com"])
    assert listed.allows(b"CHAT.example.com.:443") and not listed.allows(b"evil.example")
    assert AllowedHosts.of("0.0.0.0", []).allows(b"anything")  # its names are unknown


async def test_a_page_under_another_name_gets_nothing(open_app: AppServer) -> None:
    port = open_app.url.rsplit(":", 1)[1]
    rebound = {"Host": f"rebound.example:{port}"}
    for path in ("/", "/readyz", "/user"):
        answer = httpx.get(f"{open_app.url}{path}", headers=rebound, timeout=10)
        assert answer.status_code == 421, (path, answer.status_code)
    with pytest.raises(socketio.exceptions.ConnectionError):
        async with ChatClient.connect(open_app.url, headers=rebound, source=visitor()):
            pass
    for name in ("localhost", "127.0.0.1"):  # the names it is reached by
        own = {"Host": f"{name}:{port}"}
        assert httpx.get(f"{open_app.url}/readyz", headers=own, timeout=10).status_code == 200
    async with ChatClient.connect(open_app.url, source=visitor()) as chat:
        assert (await chat.send("你好")).error is None
