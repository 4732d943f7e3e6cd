"""Limits a client cannot walk around: per-user replies at once and messages a minute, the
app's replies at once, and without sign-in the chats one address holds, on the real app
(``open_app``, ``signed_app``) over Socket.IO, each visitor from an address of its own."""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest
import socketio

from testing.accounts import PROXY, named, session_cookie
from testing.chat_client import ChatClient
from testing.polling import until
from testing.servers import AppServer
from testing.visitors import CLAIMS, visitor

LONG = {"temperature": 0.5, "top_p": 0.9, "max_tokens": 512, "system_prompt": "zh"}


async def test_per_user_limits_answer_politely_and_count_the_user_not_the_chat(
    signed_app: AppServer,
) -> None:
    signed = httpx.post(f"{signed_app.url}/auth/header", headers=named("carol") | PROXY)
    cookie = session_cookie(signed)
    async with (
        ChatClient.connect(signed_app.url, headers=cookie, source=visitor()) as first,
        ChatClient.connect(signed_app.url, headers=cookie, source=visitor()) as second,
    ):
        replies = [await first.send("你好"), await second.send("你好")]  # one at a time: fine
        assert all(r.error is None and r.text for r in replies)
        third = await second.send("再来")  # carol's third message this minute: allowed
        assert third.error is None
        refused = await first.send("还有吗")  # the fourth, from her other chat and address
        assert refused.error is not None and "3 messages in the last minute" in refused.error
        assert not refused.text


async def test_without_sign_in_limits_count_the_address_not_the_tab(open_app: AppServer) -> None:
    url, here = open_app.url, visitor()
    async with (
        ChatClient.connect(url, source=here) as first,
        ChatClient.connect(url, source=here) as second,
    ):
        assert (await first.send("你好")).error is None
        assert (await second.send("   ")).error is not None  # refused (empty), and counted
        assert (await second.send("你好")).error is None
        # A long reply in one tab fills the app (one reply at once): the other tab's
        # message waits in line, its place shown, and is answered once the first stops.
        await first.change_settings(LONG)
        before = first.reply
        long = asyncio.create_task(first.send("写一篇长文"))

        def streaming() -> bool:
            return first.reply is not before and bool(first.reply and first.reply.frames)

        await until(streaming, 60, "the long reply's text")
        mark = len(second.messages)
        waiting = asyncio.create_task(second.send("还有吗"))  # the fifth from this address
        await second.wait_for_message(lambda m: "In line: 1st" in m, since=mark)
        await first.stop()
        await long
        answered = await waiting
        assert answered.error is None and answered.text
        refused = await second.send("再来")  # the sixth this minute: over the five
        assert refused.error is not None and "5 messages in the last minute" in refused.error


async def test_one_address_holds_a_bounded_number_of_chats(open_app: AppServer) -> None:
    url, here = open_app.url, visitor()
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(3):
            await stack.enter_async_context(ChatClient.connect(url, source=here))
        with pytest.raises(socketio.exceptions.ConnectionError):
            async with ChatClient.connect(url, source=here):
                pass
    async with ChatClient.connect(url, source=here):  # the closed chats gave their places back
        pass


async def test_a_visitor_at_the_cap_does_not_stop_another_address(open_app: AppServer) -> None:
    """Every anonymous visitor was one address (engine.io's environ names 127.0.0.1 for
    every websocket): one visitor's tabs locked everyone out."""
    url, greedy = open_app.url, visitor()
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(3):
            await stack.enter_async_context(ChatClient.connect(url, source=greedy))
        with pytest.raises(socketio.exceptions.ConnectionError):
            await stack.enter_async_context(ChatClient.connect(url, source=greedy))
        async with ChatClient.connect(url, source=visitor()) as other:
            reply = await other.send("你好")
        assert reply.error is None and reply.text


@pytest.mark.parametrize("claim", CLAIMS, ids=[next(iter(c)) for c in CLAIMS])
async def test_a_client_naming_its_own_address_gets_no_more_chats(
    open_app: AppServer, claim: dict[str, str]
) -> None:
    url, here = open_app.url, visitor()
    async with contextlib.AsyncExitStack() as stack:
        for n in range(3):
            own = {name: value.replace(".0.", f".{n}.") for name, value in claim.items()}
            await stack.enter_async_context(ChatClient.connect(url, headers=own, source=here))
        with pytest.raises(socketio.exceptions.ConnectionError):
            await stack.enter_async_context(ChatClient.connect(url, headers=claim, source=here))
