"""Limits a client cannot walk around without signing in: a new tab is no new allowance,
a refused message counts, and the whole app answers a polite "busy" past its replies at
once. The real app on the remote backend (the session's ``vllm serve``), over Socket.IO."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import socketio

from testing.chat_client import ChatClient, wait_ready
from testing.polling import until
from testing.servers import AppServer, Server

LONG = {"temperature": 0.5, "top_p": 0.9, "max_tokens": 1024, "system_prompt": "zh"}


@pytest.fixture(scope="module")
def limited_app(
    scripted_model: Path, vllm_server: Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AppServer]:
    env = {
        "ERNIE_MODEL": str(scripted_model),
        "ERNIE_ENGINE": "remote",
        "ERNIE_REMOTE_URL": vllm_server.url,
        "ERNIE_MAX_MODEL_LEN": "2048",
        "ERNIE_MAX_TOKENS": "16",
        "ERNIE_WARMUP": "false",
        "ERNIE_HISTORY_URL": "off",
        "ERNIE_USER_MAX_REPLIES": "2",
        "ERNIE_USER_MESSAGES_PER_MINUTE": "5",
        "ERNIE_MAX_REPLIES": "1",
        "ERNIE_MAX_CHATS_PER_ADDRESS": "3",
    }
    with AppServer.run(env, tmp_path_factory.mktemp("limits") / "app.log") as app:
        app.wait("/", timeout_s=180)
        yield app


async def test_without_sign_in_limits_count_the_address_not_the_tab(
    limited_app: AppServer,
) -> None:
    url = limited_app.url
    await wait_ready(url, 300)
    async with ChatClient.connect(url) as first, ChatClient.connect(url) as second:
        assert (await first.send("你好")).error is None
        assert (await second.send("   ")).error is not None  # refused (empty), and counted
        assert (await second.send("你好")).error is None
        # A long reply in one tab fills the app (one reply at once): the other tab hears so.
        await first.change_settings(LONG)
        before = first.reply
        long = asyncio.create_task(first.send("写一篇长文"))

        def streaming() -> bool:
            return first.reply is not before and bool(first.reply and first.reply.frames)

        await until(streaming, 60, "the long reply's text")
        busy = await second.send("还有吗")  # the fifth message from this address
        assert busy.error is not None and "Many people are chatting" in busy.error
        await first.stop()
        await long
        refused = await second.send("再来")  # the sixth this minute: over the five
        assert refused.error is not None and "5 messages in the last minute" in refused.error


async def test_one_address_holds_a_bounded_number_of_chats(limited_app: AppServer) -> None:
    url = limited_app.url
    await wait_ready(url, 300)
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(3):
            await stack.enter_async_context(ChatClient.connect(url))
        with pytest.raises(socketio.exceptions.ConnectionError):
            async with ChatClient.connect(url):
                pass
    async with ChatClient.connect(url):  # the closed chats gave their places back
        pass
