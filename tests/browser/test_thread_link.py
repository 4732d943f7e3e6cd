"""The thread-link attack in Chromium, in both languages, on the real app with sign-in and
history (``signed_app``): Mallory's socket names a fresh thread id, and Ann opens the link
to it he sent her. Her page says no such chat, she chats on, and before, her chat was
stored under his id: his export read it. Now her chat is a new one of the server's, and
his export holds nothing of hers (``tests/chat/access/test_thread_claims.py``: the
reload half, one process and two workers)."""

from __future__ import annotations

import uuid

import pytest
from playwright.async_api import Browser, expect

from testing.accounts import PROXY, header_sign_in, named
from testing.browser import STATS_LINE, Chat
from testing.chat_client import ChatClient
from testing.exports import exported
from testing.servers import AppServer
from testing.visitors import visitor

pytestmark = pytest.mark.engine


@pytest.mark.parametrize(
    ("locale", "secret", "stats"),
    [
        ("en-US", "Ann's secret: the safe opens with 1357.", STATS_LINE),
        ("zh-CN", "安的秘密：保险箱密码是 1357。", "首词元"),
    ],
)
async def test_a_link_to_a_thread_someone_named_opens_a_chat_of_her_own(
    signed_app: AppServer, browser: Browser, locale: str, secret: str, stats: str
) -> None:
    url, named_id = signed_app.url, str(uuid.uuid4())
    mallory = header_sign_in(url, f"mallory-{locale}")
    async with ChatClient.connect(url, headers=mallory, thread_id=named_id, source=visitor()) as m:
        ann = named(f"ann-{locale}") | PROXY
        chat = await Chat.open(browser, f"{url}/thread/{named_id}", locale, headers=ann)
        mark = await chat.send(secret)
        await expect(chat.assistant().filter(has_text=stats)).to_have_count(1, timeout=120_000)
        (started,) = chat.named("stream_start", since=mark)[:1]
        assert started[2]["threadId"] != named_id  # her chat: a thread of the server's
        assert secret not in (await exported(m))[1]  # his export: nothing of hers
        await chat.close()
