"""Two app replicas, each alone in its process with a folder of its own (as on two
machines), in front of one ``vllm serve``, counting in one PostgreSQL
(``ERNIE_COUNTS_URL``): a visitor's limits, the line's order and a sign-in lock hold over
both, as an attacker or a busy user meets them, whichever replica each request reaches.
Counted per replica, each would let a visitor have twice its allowance, run two replies
where one slot is free, and let twenty guesses through where ten lock."""

from __future__ import annotations

import asyncio
import contextlib
import re

import pytest

from testing.accounts import PASSWORD, header_sign_in, try_password
from testing.chat_client import ChatClient, Reply
from testing.servers import AppServer
from testing.visitors import visitor

pytestmark = pytest.mark.engine  # the replicas on the session's vllm serve

IN_LINE = re.compile(r"In line: (\d+)(st|nd|rd|th)")
LONGER = {"temperature": 0.5, "top_p": 0.9, "max_tokens": 256, "system_prompt": "zh"}


async def test_a_users_messages_a_minute_count_over_both_replicas(
    replicas: list[AppServer],
) -> None:
    """Three messages a minute (``SIGNED_ENV``): two on one replica, one on the other, and
    the fourth is refused wherever it is sent."""
    a, b = replicas
    async with (
        ChatClient.connect(a.url, headers=header_sign_in(a.url, "rita"), source=visitor()) as on_a,
        ChatClient.connect(b.url, headers=header_sign_in(b.url, "rita"), source=visitor()) as on_b,
    ):
        for chat in (on_a, on_b, on_a):
            reply = await chat.send("你好")
            assert reply.error is None and reply.text, reply.error
        refused = await on_b.send("还有吗")
    assert refused.error is not None and "3 messages in the last minute" in refused.error
    assert not refused.text


async def test_the_lines_order_holds_over_both_replicas(replicas: list[AppServer]) -> None:
    """One reply at once over both: a message on A runs, the next (on B) waits first in
    line, the one after (on A) second; B's is answered before A's second."""
    a, b = replicas
    async with contextlib.AsyncExitStack() as stack:
        chats = [
            await stack.enter_async_context(
                ChatClient.connect(app.url, headers=header_sign_in(app.url, name), source=visitor())
            )
            for app, name in ((a, "sam"), (b, "tess"), (a, "uma"))
        ]
        for chat in chats:
            await chat.change_settings(LONGER)
        sends: list[asyncio.Task[Reply]] = []
        for chat in chats:
            sends.append(asyncio.create_task(chat.send("讲个故事")))
            await asyncio.sleep(0.3)  # each arrives while the first still runs
        replies = await asyncio.gather(*sends)
    assert all(r.error is None and r.text for r in replies), [r.error for r in replies]
    places = [[int(m.group(1)) for m in map(IN_LINE.search, c.messages) if m] for c in chats]
    assert places[0] == [] and places[1][:1] == [1] and places[2][:1] == [2], places
    second, third = replies[1].first_text_at, replies[2].first_text_at
    assert second is not None and third is not None and second < third


async def test_a_sign_in_lock_holds_over_both_replicas(replicas: list[AppServer]) -> None:
    """Ten failures from one address lock its tries for that name: five on each replica,
    and the right password from there is refused on either; from elsewhere it signs in."""
    a, b = replicas
    address = visitor()
    for n in range(10):
        assert await try_password((a, b)[n % 2].url, "frank", f"guess {n}", address) == 401
    for app in (a, b):
        assert await try_password(app.url, "frank", PASSWORD, address) == 401  # locked
    assert await try_password(b.url, "frank", PASSWORD, visitor()) == 200  # he is not
