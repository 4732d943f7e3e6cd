"""A user's tokens a day (``ERNIE_DAILY_TOKENS``), in Chromium, in both languages, on the
two replicas of ``tests/serve/test_replicas.py`` that count in one PostgreSQL: the day's
tokens are the user's wherever the page is served. Replies are the scripted model's, as
long as the panel allows (512 tokens): the first leaves more than a fifth of the 1,500,
the second spends the rest and its footer says so, the third is refused in words on the
other replica."""

from __future__ import annotations

import pytest
from playwright.async_api import Browser, expect

from testing.accounts import PROXY, named
from testing.browser import Chat, screenshot_path
from testing.chat_apps import DAILY_TOKENS
from testing.servers import AppServer

pytestmark = pytest.mark.engine

WORDS = {
    "en-US": {
        "stats": "tokens · first token",
        "left": f"0 of today's {DAILY_TOKENS:,} tokens left",
        "spent": f"You have used today's {DAILY_TOKENS:,} tokens",
    },
    "zh-CN": {
        "stats": "首词元",
        "left": f"今日额度剩余 0 / {DAILY_TOKENS:,} 个词元",
        "spent": f"今天的 {DAILY_TOKENS:,} 个词元额度已用完",
    },
}


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
async def test_the_days_tokens_are_shown_when_few_then_refused_on_either_replica(
    replicas: list[AppServer], browser: Browser, locale: str
) -> None:
    words, headers = WORDS[locale], named(f"quinn-{locale}") | PROXY
    a, b = replicas
    chat = await Chat.open(browser, a.url, locale, headers=headers)
    await chat.set_max_tokens(512)
    replies = chat.assistant().filter(has_text=words["stats"])
    await chat.send("讲一个很长的故事")
    await expect(replies).to_have_count(1, timeout=120_000)
    await expect(replies.first).not_to_contain_text(words["left"][2:])  # plenty left
    await chat.send("再讲一个")
    await expect(replies).to_have_count(2, timeout=120_000)
    await expect(replies.last).to_contain_text(words["left"])
    await chat.page.screenshot(path=screenshot_path(f"quota-{locale}.png"))
    await chat.close()
    other = await Chat.open(browser, b.url, locale, headers=headers)
    await other.send("还能再讲吗")
    await expect(other.page.get_by_text(words["spent"])).to_have_count(1, timeout=30_000)
    await expect(other.assistant().filter(has_text=words["stats"])).to_have_count(0)
    await other.close()
