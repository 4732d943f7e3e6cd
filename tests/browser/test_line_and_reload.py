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
from testing.visitors import visitor

pytestmark = pytest.mark.engine

BEARER = {"Authorization": f"Bearer {OPS_TOKEN}"}


async def long_reply(chat: Chat, text: str, tokens: int) -> None:
    """``text`` sent with a reply of ``tokens`` (the app's longest), once its text streams."""
    await chat.set_max_tokens(tokens)
    mark = await chat.send(text)
    await chat.wait_for("stream_start", since=mark)


def shown(chat: Chat, words: str) -> bool:
    """The page was sent a message holding ``words``, new or updated in place."""
    events = chat.named("new_message") + chat.named("update_message")
    return any(words in str(data.get("output")) for _, _, data in events)


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
    for tab in (ahead, chat):  # typed first: on a loaded machine typing outlasted the reply
        await tab.type("你好")
    await long_reply(running, "写一篇长文", LONGEST_REPLY)
    await ahead.submit()
    await chat.submit()  # at once: the long reply runs for a second or two only
    # What the page was shown, as it came over its socket (a place may last a moment)
    await until(lambda: shown(ahead, "In line: 1st"), 60, "the place of the tab ahead")
    await until(lambda: shown(chat, second), 60, "the place and wait of the third tab")
    if locale == "en-US":
        await chat.page.screenshot(path=screenshot_path("line-en.png"))
    await until(lambda: shown(chat, first), 120, "the place updated")
    await expect(chat.assistant().filter(has_text=stats)).to_have_count(1, timeout=120_000)
    await expect(chat.page.get_by_text(first)).to_have_count(0)  # the place gone
    for tab in tabs:
        await tab.close()


@pytest.mark.parametrize(
    ("locale", "user", "stats", "regenerate", "first_token"),
    [
        ("en-US", "tess", STATS_LINE, "Regenerate", r"\d+ tokens · first token \d+ ms"),
        ("zh-CN", "tina", "首词元", "重新生成", r"\d+ 个词元 · 首词元 \d+ 毫秒"),
    ],
)
async def test_a_reload_mid_reply_shows_the_whole_reply_and_the_history_holds_it_once(
    signed_app: AppServer,
    browser: Browser,
    locale: str,
    user: str,
    stats: str,
    regenerate: str,
    first_token: str,
) -> None:
    proxy = named(user) | PROXY  # signed in by the trusted proxy's header
    for _ in range(3):  # a machine kept busy by others may end the reply before the reload
        chat = await Chat.open(browser, signed_app.url, locale, headers=proxy)
        await long_reply(chat, "写一篇长文", RELOADED_REPLY)
        if not shown(chat, stats):  # what the page was sent: no round trip to ask
            break
        await chat.close()  # a new chat: its history holds one reply
    else:
        pytest.fail("each long reply ended before its page could reload")
    # The chat's own address, loaded anew as a reload does, from the reply's first frame:
    # no round trip to the app first (the page moving there itself, or asking the history,
    # took longer than the reply where the app's process waits on a busy CPU).
    thread_id = chat.named("stream_start")[-1][2]["threadId"]
    await chat.page.goto(f"{signed_app.url}/thread/{thread_id}")  # mid-reply: the page goes
    # The reloaded page shows the reply whole (before, the reload stopped it: a partial
    # reply, no stats); as it stood meanwhile: tests/chat/test_reload.py.
    replies = chat.assistant().filter(has_text="注意")
    await expect(replies.filter(has_text=stats)).to_have_count(1, timeout=120_000)
    await expect(chat.page.get_by_role("button", name=regenerate)).to_have_count(1)
    on_page = await replies.inner_text()
    cookie = session_cookie(httpx.post(f"{signed_app.url}/auth/header", headers=proxy))
    thread = httpx.get(f"{signed_app.url}/project/thread/{thread_id}", headers=cookie)
    stored = [s for s in json.loads(thread.text)["steps"] if "注意" in s["output"]]  # the model's
    assert len(stored) == 1, stored  # one reply, not two
    found = re.search(first_token, stored[0]["output"])
    assert found and found.group(0) in on_page  # the stored reply is the one shown
    await chat.close()
