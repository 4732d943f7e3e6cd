"""The place in line under load, on the real app and the real engine: more chats than the
replies at once, from several loopback addresses, back to back. Every message answered,
in arrival order within each visitor, none lost, places shown; ``/metrics`` says how many
waited and how long. On one process (``open_app``: one reply at once, eight may wait)
and on two workers of one engine core behind the group's HAProxy (``signed_group``: two
at once over the group, sixteen may wait: the workers share one line)."""

from __future__ import annotations

import asyncio
import contextlib
import re

import httpx

from testing.accounts import OPS_TOKEN, PROXY, named, session_cookie
from testing.chat_apps import LONGEST_REPLY
from testing.chat_client import ChatClient, Reply
from testing.polling import until
from testing.servers import AppServer
from testing.visitors import visitor

IN_LINE = re.compile(r"In line: \d+(st|nd|rd|th)")
# Replies long enough (some tenths of a second each) that a burst's later messages arrive
# while the first still runs, however fast the machine.
LONGER = {"temperature": 0.5, "top_p": 0.9, "max_tokens": 256, "system_prompt": "zh"}


def line_waits(url: str, headers: dict[str, str] | None = None) -> float:
    """How many messages waited in line, per ``/metrics``."""
    text = httpx.get(f"{url}/metrics", headers=headers, timeout=10).text
    found = re.search(r"^ernie_line_wait_seconds_count(?:\{[^}]*\})? (\S+)$", text, re.M)
    assert found, "no ernie_line_wait_seconds in /metrics"
    return float(found.group(1))


def signed_in(url: str, n: int) -> dict[str, str]:
    """The session cookie of user ``line<n>``, named by the trusted proxy."""
    return session_cookie(httpx.post(f"{url}/auth/header", headers=named(f"line{n}") | PROXY))


async def test_more_chats_than_the_app_takes_wait_in_line_and_are_all_answered_in_order(
    open_app: AppServer,
) -> None:
    """Four visitors, two tabs each, eight messages back to back; one reply at once."""
    waited_before = line_waits(open_app.url)
    visitors = [visitor() for _ in range(4)]
    async with contextlib.AsyncExitStack() as stack:
        tabs = [
            [
                await stack.enter_async_context(ChatClient.connect(open_app.url, source=v))
                for _ in range(2)
            ]
            for v in visitors
        ]
        for tab in (tab for pair in tabs for tab in pair):
            await tab.change_settings(LONGER)
        sends: list[asyncio.Task[Reply]] = []
        for first, second in tabs:  # each visitor's first, then its second, in that order
            sends.append(asyncio.create_task(first.send("你好")))
            await asyncio.sleep(0.01)
            sends.append(asyncio.create_task(second.send("再来一个")))
            await asyncio.sleep(0.01)
        replies = await asyncio.gather(*sends)
    assert all(r.error is None and r.text for r in replies), [r.error for r in replies]
    for n in range(0, 8, 2):  # within each visitor, arrival order
        first, second = replies[n], replies[n + 1]
        assert first.first_text_at is not None and second.first_text_at is not None
        assert first.first_text_at < second.first_text_at
    shown = [any(IN_LINE.search(m) for m in tab.messages) for pair in tabs for tab in pair]
    assert sum(shown) >= 6, shown  # one ran at once; the others waited (one may find a
    assert line_waits(open_app.url) - waited_before >= sum(shown)  # slot free at once)


async def test_two_workers_share_one_line_behind_the_proxy(signed_group: AppServer) -> None:
    """Six signed-in visitors from addresses of their own, through the one port."""
    bearer = {"Authorization": f"Bearer {OPS_TOKEN}"}
    waited_before = line_waits(signed_group.url, bearer)
    async with contextlib.AsyncExitStack() as stack:
        chats = [
            await stack.enter_async_context(
                ChatClient.connect(
                    signed_group.url, headers=signed_in(signed_group.url, n), source=visitor()
                )
            )
            for n in range(6)
        ]
        for chat in chats:
            await chat.change_settings(LONGER)
        replies = await asyncio.gather(*(chat.send("你好") for chat in chats))
    assert all(r.error is None and r.text for r in replies), [r.error for r in replies]
    shown = [any(IN_LINE.search(m) for m in chat.messages) for chat in chats]
    # Two ran at once over both workers and four waited (one may find a slot freed before
    # its first look); a line of each worker's own would have let four run, two waiting.
    assert sum(shown) >= 3, shown
    assert line_waits(signed_group.url, bearer) - waited_before >= sum(shown)


def metric(url: str, name: str) -> float:
    """The sum of a metric's samples in ``/metrics`` (every label)."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(float(v) for v in re.findall(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", text, re.M))


async def test_a_closed_tabs_waiting_message_leaves_the_line_and_runs_no_reply(
    open_app: AppServer,
) -> None:
    """History off: a page that goes away stops its reply at once, and a message of it
    waiting in line leaves it (before, three closed tabs' messages each ran a whole reply
    for nobody, ahead of a newcomer)."""
    url = open_app.url
    replies_before = metric(url, "ernie_replies_total")
    async with ChatClient.connect(url, source=visitor()) as running:
        await running.change_settings(LONGER | {"max_tokens": LONGEST_REPLY})
        long_one = asyncio.create_task(running.send("写一篇长文"))
        await until(lambda: running.reply_id is not None, 60, "the long reply streaming")
        for _ in range(3):  # each a visitor of its own: their message waits, then they go
            async with ChatClient.connect(url, source=visitor()) as gone:
                await gone.change_settings(LONGER)
                sending = asyncio.create_task(gone.send("你好"))
                await gone.wait_for_message(lambda m: IN_LINE.search(m) is not None)
            sending.cancel()
        await until(lambda: metric(url, "ernie_line_waiting") == 0, 10, "the line empty")
        assert (await long_one).error is None
    async with ChatClient.connect(url, source=visitor()) as newcomer:
        reply = await newcomer.send("你好")
    assert reply.error is None and reply.final
    assert not any(IN_LINE.search(m) for m in newcomer.messages)  # nobody ahead
    # The long one and his (and at most one another test left running): the three that
    # went away ran none (before: five)
    assert metric(url, "ernie_replies_total") - replies_before <= 3
