"""No message is lost, whatever the order events arrive in and however the visitor's
connection behaves: the load shapes of ``testing.shapes``, small, against the real app in
one process (the session's demo app on the local engine; ``signed_app``, with history, for
the reconnect). Each chat speaks from an address of its own. The group's are in
``tests/serve/test_workers.py``.
"""

from __future__ import annotations

import json

import httpx
import psutil
import pytest

from testing.accounts import OPS_TOKEN, PROXY, named, session_cookie
from testing.chat_client import wait_ready
from testing.demo import DEMO_APP_ENV
from testing.engines import DemoApp
from testing.servers import AppServer
from testing.shapes import SlowReader, at_connect, back_to_back, reconnect, with_idle_tabs

pytestmark = pytest.mark.engine

SOCKET_TIMEOUT_S = float(DEMO_APP_ENV["ERNIE_SOCKET_TIMEOUT_S"])  # the demo app's
BEARER = {"Authorization": f"Bearer {OPS_TOKEN}"}


async def test_messages_sent_the_moment_a_chat_connects_are_all_answered(
    demo_app: DemoApp,
) -> None:
    """A message that came before the chat's start found no chat: 0 of 16 answered."""
    await wait_ready(demo_app.server.url, 300)
    tally = await at_connect(demo_app.server.url, chats=16)
    assert (tally.sent, tally.answered, tally.lost) == (16, 16, 0), tally


async def test_bursts_back_to_back_lose_nothing(demo_app: DemoApp) -> None:
    """A burst's sockets closing while the next one connects and sends (the loop busy with
    the closing chats lost a whole burst on the H200)."""
    await wait_ready(demo_app.server.url, 300)
    tally = await back_to_back(demo_app.server.url, chats=8, bursts=3)
    assert (tally.sent, tally.answered, tally.lost) == (24, 24, 0), tally


async def test_a_socket_that_drops_mid_reply_comes_back_to_it(signed_app: AppServer) -> None:
    """A phone changing networks mid-reply: with the history on, the reply goes on, and
    when the socket comes back to its session the reply is there in full; the history
    keeps the message and the whole reply, once. (Without the history the engine is
    freed at once, and the reply says why it stopped: tests/chat/in_process/test_replies.)"""
    url = signed_app.url
    users = ("nora", "olga", "paul")  # one reply at once each (the app's limit)
    cookies = [
        session_cookie(httpx.post(f"{url}/auth/header", headers=named(u) | PROXY)) for u in users
    ]
    tally, chats = await reconnect(url, chats=3, headers=lambda i: cookies[i])
    assert (tally.sent, tally.answered, tally.lost) == (3, 3, 0), tally
    for chat in chats:
        reply = chat.reply
        assert reply is not None and reply.final is not None and reply.after_reconnect
        assert "connection was lost" not in reply.final and "tokens/s" in reply.final
    await signed_app.wait_for_running(0, within_s=10, headers=BEARER)
    body = {"pagination": {"first": 20}, "filter": {}}
    for cookie, chat in zip(cookies, chats, strict=True):
        listed = httpx.post(f"{url}/project/threads", json=body, headers=cookie, timeout=10)
        (thread,) = json.loads(listed.text)["data"]
        assert any("杭州" in step["output"] for step in thread["steps"])  # the user's message
        replies = [s["output"] for s in thread["steps"] if "注意" in s["output"]]  # the model's
        assert chat.reply is not None and replies == [chat.reply.final]  # whole, once


async def test_a_thousand_idle_tabs_do_not_stop_the_chats(demo_app: DemoApp) -> None:
    url = demo_app.server.url
    await wait_ready(url, 300)
    async with with_idle_tabs(url, 1000) as tabs:
        assert tabs == 1000
        tally = await at_connect(url, chats=8)
    assert (tally.sent, tally.answered, tally.lost) == (8, 8, 0), tally


def serving_rss(server: AppServer) -> int:
    """The resident memory of the app's serving process (below ``nice``, if any)."""
    process = psutil.Process(server.process.pid)
    tree = [process, *process.children(recursive=True)]
    return max(p.memory_info().rss for p in tree if "serve" in " ".join(p.cmdline()))


async def test_a_reader_that_stops_is_ended_and_costs_the_others_nothing(
    demo_app: DemoApp,
) -> None:
    """A client that stops reading its socket mid-reply holds nothing for long: the server
    ends it after ERNIE_SOCKET_TIMEOUT_S, its memory stays bounded, and the chats beside
    it are all answered."""
    server = demo_app.server
    await wait_ready(server.url, 300)
    before = serving_rss(server)
    slow = SlowReader(server.url)
    async with slow.stopped() as ended:
        tally = await at_connect(server.url, chats=8)
        assert (tally.sent, tally.answered, tally.lost) == (8, 8, 0), tally
        assert await ended(SOCKET_TIMEOUT_S + 4)
    assert serving_rss(server) - before < 64 * 2**20
    await server.wait_for_running(0, within_s=10)
