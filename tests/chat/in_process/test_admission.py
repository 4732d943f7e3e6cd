"""Admission on the mock engine: what the front door and admission refuse is refused in
words, in the chat's language, before the engine is asked; the session goes on."""

from __future__ import annotations

import pytest

from engine import message_check
from engine.message_check import CheckedText
from testing.in_process import Page, app_on, message_payload, mock_engine
from testing.polling import until


async def refused(page: Page, payload: object, words: str) -> None:
    await page.receive("client_message", payload)
    await page.wait_for_text(words)


async def test_an_empty_message_is_refused_and_the_engine_not_asked() -> None:
    engine = mock_engine()
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        await refused(page, message_payload(" \n\t "), "Your message is empty")
        assert engine.requests == []
        await page.send("now something")
        assert engine.requests[0].text == "now something"


async def test_a_message_past_the_length_setting_is_refused_in_chinese() -> None:
    engine = mock_engine(max_message_chars=10)
    async with app_on(engine) as app:
        page = app.open_page(language="zh-CN")
        await page.connect()
        await refused(page, message_payload("长" * 11), "消息太长：11 个字符，最多接受 10 个")
        assert engine.requests == []


async def test_control_characters_are_cleaned_before_the_engine_sees_the_text() -> None:
    engine = mock_engine()
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        await page.send("a\x00b\r\nc\ud800")
        assert engine.requests[0].text == "ab\nc\ufffd"


async def test_a_payload_that_is_no_chat_message_gets_words_not_a_traceback() -> None:
    engine = mock_engine()
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        await refused(page, {"message": {"id": "x", "output": 5}}, "could not be read")
        await refused(page, message_payload("hi", message_id="not-a-uuid"), "could not be read")
        assert engine.requests == [] and not any("Traceback" in t for t in page.texts())
        await page.send("a real one")
        assert [r.text for r in engine.requests] == ["a real one"]


async def test_an_edit_of_a_message_the_user_did_not_send_is_refused() -> None:
    engine = mock_engine()
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        await page.send("mine")
        reply_id = page.shown("assistant_message")[0]["id"]
        await page.receive("edit_message", message_payload("theirs", message_id=reply_id))
        await page.wait_for_text("could not be read")
        assert [r.text for r in engine.requests] == ["mine"]


async def test_one_visitors_replies_at_once_are_capped_and_others_are_not() -> None:
    engine = mock_engine(["slow "] * 20, chunk_delay_s=0.02, user_max_replies=1)
    async with app_on(engine) as app:
        first, second = app.open_page(), app.open_page()  # two tabs of 127.0.0.2
        other = app.open_page(address="127.0.0.3")
        for page in (first, second, other):
            await page.connect()
        await first.receive("client_message", message_payload("one"))
        await until(lambda: engine.running_requests == 1, 5, "the first reply running")
        await refused(second, message_payload("two"), "You already have 1 replies")
        await other.send("three")  # another visitor is not held back
        await first.settled()
        await second.send("four")  # the place was given back
        assert [r.text for r in engine.requests] == ["one", "three", "four"]


async def test_messages_past_the_rate_a_minute_are_refused_with_the_wait() -> None:
    engine = mock_engine(user_messages_per_minute=2)
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        await page.send("one")
        await page.send("two")
        await refused(page, message_payload("three"), "You have sent 2 messages in the last minute")
        assert len(engine.requests) == 2


async def test_a_burst_from_one_tab_is_answered_in_order_and_gives_its_places_back() -> None:
    engine = mock_engine(chunk_delay_s=0.01, user_max_replies=3)
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        for n in range(3):  # back to back, each in a task of its own as Chainlit runs them
            await page.receive("client_message", message_payload(f"m{n}"))
        await until(lambda: len(page.texts()) == 3, 5, "three replies")
        assert [r.text for r in engine.requests] == ["m0", "m1", "m2"]
        for n in range(3, 6):  # past the cap of 3 at once: only if each place came back
            await page.send(f"m{n}")
        assert len(page.texts()) == 6 and engine.running_requests == 0


async def test_a_message_is_checked_once_and_the_checked_text_reaches_the_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cleaned: list[str] = []
    clean = message_check.clean_message
    monkeypatch.setattr(message_check, "clean_message", lambda t: cleaned.append(t) or clean(t))
    engine = mock_engine()
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        await page.send("once\r\nonly")
        assert cleaned == ["once\r\nonly"]  # at the front door, not again in the engine
        assert isinstance(engine.requests[0].text, CheckedText)
        assert engine.requests[0].text == "once\nonly"


@pytest.mark.parametrize(
    ("language", "left", "spent"),
    [
        ("en-US", "0 of today's 100 tokens left", "You have used today's 100 tokens"),
        ("zh-CN", "今日额度剩余 0 / 100 个词元", "今天的 100 个词元额度已用完"),
    ],
)
async def test_a_visitors_tokens_a_day_are_shown_when_few_then_refused_politely(
    language: str, left: str, spent: str
) -> None:
    """``ERNIE_DAILY_TOKENS``: each reply spends its prompt and reply (the mock counts a
    character a token); below a fifth left the footer says so, past it the next message
    is refused in words, and another visitor's day is their own."""
    engine = mock_engine(reply="好" * 30, daily_tokens=100)
    async with app_on(engine) as app:
        page = app.open_page(language=language)
        await page.connect()
        await page.send("一二三四五")  # 5 + 30 spent: 65 left, nothing said
        assert left[2:8] not in page.texts()[-1]  # no tokens-left note yet
        await page.send("六七八九十")  # 40 + 30 more: 105 spent
        assert left in page.texts()[-1]
        await refused(page, message_payload("再来一次"), spent)
        assert len(engine.requests) == 2
        other = app.open_page(address="127.0.0.3", language=language)
        await other.connect()
        await other.send("我是别人")
        assert len(engine.requests) == 3
