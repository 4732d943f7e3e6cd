"""What a signed-in user with a history reaches for daily, in Chromium, in both
languages, on the real app (``signed_app``: sign-in by the trusted proxy's header, a
SQLite history; ``tests/chat/test_search.py`` holds the search on PostgreSQL too):

* the sidebar's search finds a chat by two Chinese characters of any of its messages,
  and none of another user's;
* 👍 / 👎 on a reply, with a comment: stored with the reply (the sidebar's data and the
  export's JSON), counted in ``/metrics``;
* the Share button: a read-only link another signed-in user opens."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.async_api import Browser, expect

from testing.accounts import OPS_TOKEN, PROXY, header_sign_in, listed_threads, named
from testing.browser import STATS_LINE, Chat, screenshot_path
from testing.chat_client import ChatClient
from testing.exports import exported
from testing.servers import AppServer
from testing.visitors import visitor

pytestmark = pytest.mark.engine

WORDS = {
    "en-US": {
        "stats": STATS_LINE,
        "search": "Search conversations...",
        "share": "Share",
        "title": "A shared chat",
    },
    "zh-CN": {"stats": "首词元", "search": "搜索会话...", "share": "分享", "title": "分享的对话"},
}


async def a_chat(url: str, cookie: dict[str, str], text: str) -> None:
    """A chat of the cookie's user whose first message is ``text``, answered."""
    async with ChatClient.connect(url, headers=cookie, source=visitor()) as chat:
        reply = await chat.send(text, timeout_s=120)
        assert reply.error is None and reply.text, reply.error


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
async def test_the_sidebars_search_finds_a_chat_by_chinese_words(
    signed_app: AppServer, browser: Browser, locale: str
) -> None:
    url, user = signed_app.url, f"sina-{locale}"
    cookie = header_sign_in(url, user)
    for text in ("我的猫叫小花，它三岁了。", "明天上海下雨吗？", "Tell me a joke"):
        await a_chat(url, cookie, text)
    await a_chat(url, header_sign_in(url, f"other-{locale}"), "我的猫也叫小花")  # not hers
    chat = await Chat.open(browser, url, locale, headers=named(user) | PROXY)
    await chat.page.locator("#search-chats-button").click()
    box = chat.page.get_by_placeholder(WORDS[locale]["search"])
    await box.fill("小花")
    found = chat.page.get_by_role("option")
    await expect(found).to_have_count(1, timeout=15_000)
    await expect(found.first).to_contain_text("我的猫叫小花")
    await chat.page.screenshot(path=screenshot_path(f"search-{locale}.png"))
    await box.fill("上海下雨")
    await expect(found).to_have_count(1, timeout=15_000)
    await expect(found.first).to_contain_text("明天上海下雨吗")
    await chat.close()


def feedback_total(url: str, value: str) -> float:
    bearer = {"Authorization": f"Bearer {OPS_TOKEN}"}
    text = httpx.get(f"{url}/metrics", headers=bearer, timeout=10).text
    found = re.search(rf'^ernie_feedback_total{{value="{value}"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
async def test_a_thumbs_up_with_a_comment_is_kept_with_the_reply_and_counted(
    signed_app: AppServer, browser: Browser, locale: str
) -> None:
    url, user, comment = signed_app.url, f"fay-{locale}", "讲得清楚，谢谢！"
    before = feedback_total(url, "up")
    chat = await Chat.open(browser, url, locale, headers=named(user) | PROXY)
    await chat.set_max_tokens(32)
    await chat.send("介绍一下长城")
    reply = chat.assistant().filter(has_text=WORDS[locale]["stats"])
    await expect(reply).to_have_count(1, timeout=120_000)
    thumbs_up = chat.page.locator(".positive-feedback-off").last
    await expect(thumbs_up).to_be_enabled(timeout=30_000)
    await thumbs_up.click()
    await chat.page.locator("textarea").last.fill(comment)
    await chat.page.locator("#submit-feedback").click()
    await expect(chat.page.locator(".positive-feedback-on")).to_have_count(1, timeout=15_000)
    await chat.page.screenshot(path=screenshot_path(f"feedback-{locale}.png"))
    await chat.close()
    assert feedback_total(url, "up") == before + 1
    cookie = header_sign_in(url, user)
    (thread,) = listed_threads(url, cookie)
    kept = [s["feedback"] for s in thread["steps"] if s.get("feedback")]
    assert [(f["value"], f["comment"]) for f in kept] == [(1, comment)]
    async with ChatClient.connect(url, headers=cookie, thread_id=thread["id"]) as again:
        _, body = await exported(again)
    assert '"value": 1' in body and comment in body, body


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
async def test_the_share_button_makes_a_read_only_link_another_user_opens(
    signed_app: AppServer, browser: Browser, locale: str
) -> None:
    url, words, said = signed_app.url, WORDS[locale], "请把这段对话分享给同事。"
    chat = await Chat.open(browser, url, locale, headers=named(f"sam-{locale}") | PROXY)
    await chat.set_max_tokens(32)
    await chat.send(said)
    await expect(chat.assistant().filter(has_text=words["stats"])).to_have_count(1, timeout=120_000)
    await chat.page.get_by_role("button", name=words["share"], exact=True).last.click()
    link = chat.page.locator("a[href^='/shared/']")
    await expect(link).to_have_count(1, timeout=15_000)
    path = await link.get_attribute("href")
    await chat.page.screenshot(path=screenshot_path(f"share-{locale}.png"))
    await chat.close()
    reader = await Chat.open(browser, url, locale, headers=named("tom") | PROXY)  # signed in
    page = reader.page
    await page.goto(f"{url}{path}")
    await expect(page.get_by_role("heading", level=1)).to_have_text(words["title"])
    await expect(page.get_by_text(said)).to_have_count(1)
    await page.screenshot(path=screenshot_path(f"shared-page-{locale}.png"))
    await reader.close()
