"""The place in line and the reply that survives a reload, in Chromium, on the real app
and the real engine (the session's ``vllm serve``).

* ``open_app``: one reply at once; each tab a visitor of its own, named by the trusted
  proxy's header (the browser speaks from 127.0.0.1 only).
* ``signed_app``: sign-in and history; the tab signed in by the proxy's header.
"""

from __future__ import annotations

import json
import re

import httpx
import pytest
from playwright.async_api import Browser, expect

from testing.accounts import OPS_TOKEN, PROXY, forwarded, named, session_cookie
from testing.browser import STATS_LINE, Chat, screenshot_path
from testing.chat_apps import LONGEST_REPLY, RELOADED_REPLY
from testing.polling import until
from testing.servers import AppServer
from testing.shapes import thread_owned
from testing.visitors import visitor

pytestmark = pytest.mark.engine

BEARER = {"Authorization": f"Bearer {OPS_TOKEN}"}


async def long_reply(chat: Chat, text: str, tokens: int) -> None:
    """``text`` sent with a reply of ``tokens`` (the app's longest), once its text streams."""
    await chat.set_max_tokens(tokens)
    mark = await chat.send(text)
    await chat.wait_for("stream_start", since=mark)


@pytest.mark.parametrize(
    ("locale", "second", "first", "stats"),
    [
        ("en-US", "In line: 2nd, about", "In line: 1st", STATS_LINE),
        ("zh-CN", "排队中：第 2 位，约", "排队中：第 1 位", "首词元"),
    ],
)
async def test_messages_past_the_cap_show_their_place_live_then_their_reply(
    open_app: AppServer, browser: Browser, locale: str, second: str, first: str, stats: str
) -> None:
    """One reply at once: the third tab is 2nd in line with its wait, then 1st, then
    answered; its place is updated in place as the line moves."""
    tabs = [await Chat.open(browser, open_app.url, headers=forwarded(visitor())) for _ in "ab"]
    tabs.append(await Chat.open(browser, open_app.url, locale, headers=forwarded(visitor())))
    running, ahead, chat = tabs
    await running.send("你好")
    await running.reply_after(1)  # a reply ended: the line can estimate its wait
    await long_reply(running, "写一篇长文", LONGEST_REPLY)
    await ahead.send("你好")
    await expect(ahead.page.get_by_text("In line: 1st")).to_be_visible(timeout=30_000)
    await chat.send("你好")
    await expect(chat.page.get_by_text(second)).to_be_visible(timeout=30_000)
    if locale == "en-US":
        await chat.page.screenshot(path=screenshot_path("line-en.png"))

    def moved_up() -> bool:
        return any(first in str(e[2].get("output")) for e in chat.named("update_message"))

    await until(moved_up, 120, "the place updated")
    await expect(chat.assistant().filter(has_text=stats)).to_have_count(1, timeout=120_000)
    await expect(chat.page.get_by_text(first)).to_have_count(0)  # the place gone
    for tab in tabs:
        await tab.close()


async def test_a_reload_mid_reply_shows_the_whole_reply_and_the_history_holds_it_once(
    signed_app: AppServer, browser: Browser
) -> None:
    user = named("tess") | PROXY
    chat = await Chat.open(browser, signed_app.url, headers=user)
    await long_reply(chat, "写一篇长文", RELOADED_REPLY)
    await until(lambda: "/thread/" in chat.page.url, 30, "the chat's own address")
    thread_id = chat.page.url.rsplit("/", 1)[-1]
    cookie = session_cookie(httpx.post(f"{signed_app.url}/auth/header", headers=user))
    await until(lambda: thread_owned(signed_app.url, thread_id, cookie), 30, "the thread")
    await chat.page.reload()  # mid-reply: the page goes, the reply goes on
    replies = chat.assistant().filter(has_text="注意")
    await expect(replies).to_have_count(1, timeout=30_000)  # as it stands
    assert await chat.page.get_by_text(STATS_LINE).count() == 0, "the reply ended already"
    await expect(replies.filter(has_text=STATS_LINE)).to_have_count(1, timeout=120_000)
    await expect(chat.page.get_by_role("button", name="Regenerate")).to_have_count(1)
    shown = await replies.inner_text()
    thread = httpx.get(f"{signed_app.url}/project/thread/{thread_id}", headers=cookie)
    stored = [s for s in json.loads(thread.text)["steps"] if "注意" in s["output"]]  # the model's
    assert len(stored) == 1, stored  # one reply, not two
    stats = re.search(r"\d+ tokens · first token \d+ ms", stored[0]["output"])
    assert stats and stats.group(0) in shown  # the stored reply is the one shown
    await chat.close()
