"""The place in line on the mock engine: past the replies at once a message waits with its
place shown (in the chat's language), then is answered; a stop leaves the line; a full
line refuses in words."""

from __future__ import annotations

from collections.abc import Sequence

from engine import Turn
from testing.in_process import Page, app_on, message_payload, mock_engine
from testing.polling import until


def slow(history: Sequence[Turn], text: str) -> list[str]:
    return [f"{text} "] * 10  # ten chunks: a reply that holds its slot a while


def notices(page: Page, words: str) -> list[str]:
    """What the page was shown holding ``words``, gone or not (a passing notice)."""
    shown = [data.get("output", "") for data in page.emitted("new_message")]
    shown += [data.get("output", "") for data in page.emitted("update_message")]
    return [text for text in shown if words in text]


async def test_a_message_past_the_replies_at_once_waits_with_its_place_then_is_answered() -> None:
    engine = mock_engine(slow, chunk_delay_s=0.05, max_replies=1, max_waiting=4)
    async with app_on(engine) as app:
        first = app.open_page(address="127.0.0.2")
        second = app.open_page(address="127.0.0.3", language="zh-CN")
        third = app.open_page(address="127.0.0.4")
        for page in (first, second, third):
            await page.connect()
        await first.receive("client_message", message_payload("one"))
        await second.receive("client_message", message_payload("two"))
        await third.receive("client_message", message_payload("three"))
        await until(lambda: notices(third, "In line: 2nd"), 5, "third's place")
        assert notices(second, "排队中：第 1 位") and not notices(first, "In line")
        await until(lambda: notices(third, "In line: 1st"), 5, "third moving up")
        for page in (first, second, third):
            await page.settled()
        assert [r.text for r in engine.requests] == ["one", "two", "three"]
        for page, text in ((first, "one"), (second, "two"), (third, "three")):
            (reply,) = page.texts()
            assert reply.startswith(f"{text} {text}")  # the notice gone, the reply there


async def test_a_stopped_message_leaves_the_line_and_a_full_line_refuses() -> None:
    engine = mock_engine(slow, chunk_delay_s=0.05, max_replies=1, max_waiting=1)
    async with app_on(engine) as app:
        pages = [app.open_page(address=f"127.0.0.{n}") for n in (2, 3, 4, 5)]
        for page in pages:
            await page.connect()
        running, waiting, refused, later = pages
        await running.receive("client_message", message_payload("one"))
        await waiting.receive("client_message", message_payload("two"))
        await until(lambda: notices(waiting, "In line: 1st"), 5, "the place")
        await refused.receive("client_message", message_payload("three"))
        await refused.wait_for_text("the line is full")
        await waiting.receive("stop")  # the stop button while it waits: it leaves
        await waiting.settled()
        await later.receive("client_message", message_payload("four"))
        await until(lambda: notices(later, "In line: 1st"), 5, "the place left free")
        await later.settled()
        assert [r.text for r in engine.requests] == ["one", "four"]
