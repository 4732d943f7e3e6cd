"""A reply's life on the mock engine: stopped, dropped with its socket, delivered when the
socket comes back; the settings panel's values reach the engine, others are refused."""

from __future__ import annotations

from chat import metrics
from testing.in_process import app_on, message_payload, mock_engine
from testing.polling import until

SLOW = ["word "] * 50  # 50 chunks, 20 ms apart: a second of reply


async def test_stop_ends_the_reply_in_the_engine_and_keeps_what_was_written() -> None:
    engine = mock_engine(SLOW, chunk_delay_s=0.02)
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        await page.receive("client_message", message_payload("talk"))
        await until(lambda: "word word" in "".join(page.texts()), 5, "some words")
        await page.receive("stop")
        await page.settled()
        await until(lambda: engine.running_requests == 0, 5, "the engine freed")
        assert engine.requests[0].finish_reason is None  # closed early: not run out
        (reply,) = [t for t in page.texts() if "word" in t]
        assert 0 < reply.count("word") < 50
        assert metrics.REPLYING._value.get() == 0


async def test_a_stop_with_nothing_to_stop_sends_nothing() -> None:
    async with app_on(mock_engine()) as app:
        page = app.open_page()
        await page.connect()
        before = len(page.events)
        await page.receive("stop")
        assert page.events[before:] == [] and page.texts() == []


async def test_a_dropped_socket_frees_the_engine_and_its_return_shows_why_it_stopped() -> None:
    engine = mock_engine(SLOW, chunk_delay_s=0.02)
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        await page.receive("client_message", message_payload("talk"))
        await until(lambda: page.texts(), 5, "the reply streaming")
        await page.drop()
        await until(lambda: engine.running_requests == 0, 5, "the engine freed")
        await page.settled()
        await page.come_back()
        await page.wait_for_text("the connection was lost while this reply was being written")
        await page.send("again")  # the chat goes on
        assert engine.requests[-1].text == "again" and engine.requests[-1].finish_reason == "stop"


async def test_a_reply_that_ends_while_the_socket_is_away_is_shown_on_its_return() -> None:
    engine = mock_engine(["done"])
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        await page.send("first")
        await page.drop()
        page.events.clear()  # what the page shows now is what its return brings
        await page.come_back()
        assert len(engine.requests) == 1  # its return asks the engine for nothing again
        await page.send("second")
        assert [r.text for r in engine.requests] == ["first", "second"]
        assert engine.requests[1].history[0].content == "first"  # the chat kept its turns


async def test_the_panels_values_reach_the_next_reply() -> None:
    engine = mock_engine(max_tokens=512)
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        values = {"temperature": 0.3, "top_p": 0.9, "max_tokens": 256, "system_prompt": "en"}
        await page.receive("chat_settings_change", values)
        await until(lambda: page.session.chat_settings == values, 5, "the settings kept")
        await page.send("hi")
        options = engine.requests[0].options
        assert (options.temperature, options.top_p, options.max_tokens) == (0.3, 0.9, 256)
        assert options.system_prompt == "en"


async def test_values_the_panel_cannot_send_are_refused_and_change_nothing() -> None:
    engine = mock_engine(max_tokens=512)
    async with app_on(engine) as app:
        page = app.open_page(language="zh-CN")
        await page.connect()
        too_long = {"temperature": 0.3, "top_p": 0.9, "max_tokens": 4096, "system_prompt": "en"}
        await page.receive("chat_settings_change", too_long)
        await page.wait_for_text("未采用这些设置")
        await page.receive("chat_settings_change", {"seed": 1})
        await page.wait_for_text("设置面板没有这样的设置项")
        await page.send("hi")
        assert engine.requests[0].options.max_tokens is None  # the defaults still hold


async def test_every_message_and_reply_is_counted_in_the_metrics() -> None:
    messages = metrics.MESSAGES._value.get()
    async with app_on(mock_engine()) as app:
        page = app.open_page()
        await page.connect()
        await page.send("one")
        await page.receive("client_message", message_payload(""))
        await page.wait_for_text("Your message is empty")
    assert metrics.MESSAGES._value.get() == messages + 2
