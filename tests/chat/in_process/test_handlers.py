"""The chat's handlers on the mock engine: a reply, its history, an edit, the loading and
failed states, the length note, the demo notice, the starters, both languages."""

from __future__ import annotations

import asyncio

import pytest

from chat import handlers
from engine import GenerationError, MockEngine, MockModel
from serve import web
from testing.in_process import app_on, message_payload, mock_engine
from testing.polling import until


async def test_a_message_gets_a_streamed_reply_with_its_footer_and_no_thinking_left() -> None:
    async with app_on(mock_engine(["你好，", "世界。"])) as app:
        page = app.open_page()
        await page.connect()
        await page.send("hi")
        (reply,) = page.texts()
        assert reply.startswith("你好，世界。") and "tokens" in reply
        assert page.emitted("stream_start"), "the reply streamed"
        thinking = [d for d in page.emitted("new_message") if "Thinking" in d["output"]]
        assert thinking and all(
            d["id"] in {x["id"] for x in page.emitted("delete_message")} for d in thinking
        )


async def test_each_reply_is_written_after_the_exchanges_before_it() -> None:
    engine = mock_engine()
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        await page.send("one")
        await page.send("two")
        first, second = engine.requests
        assert first.history == [] and second.text == "two"
        assert [(turn.role, turn.content) for turn in second.history] == [
            ("user", "one"),
            ("assistant", "echo (0 turns before): one"),
        ]


async def test_an_edit_answers_again_from_the_edited_message() -> None:
    engine = mock_engine()
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        first = await page.send("one")
        await page.send("two")
        edited = message_payload("ONE", message_id=first)
        await page.receive("edit_message", edited)
        await page.settled()
        await until(lambda: len(engine.requests) == 3, 5, "the edit's reply")
        assert engine.requests[-1].text == "ONE" and engine.requests[-1].history == []


async def test_a_chat_opened_while_loading_says_so_and_its_message_waits() -> None:
    async with app_on(MockEngine(load_s=0.3)) as app:
        page = app.open_page()
        await page.connect()
        await page.wait_for_text("Loading the model")
        sent = asyncio.ensure_future(page.send("early"))
        await page.wait_for_text("Model ready")
        await sent
        assert any("echo (0 turns before): early" in text for text in page.texts())


async def test_a_failed_engine_says_why_in_the_chat_in_chinese() -> None:
    async with app_on(MockEngine(failure="no GPU here")) as app:
        page = app.open_page(language="zh-CN")
        await page.connect()
        await page.send("你好")
        await page.wait_for_text("模型不可用：no GPU here")


async def test_a_failed_reply_gets_words_and_the_next_message_is_answered() -> None:
    engine = mock_engine()
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        engine.fail_next(GenerationError())
        await page.send("first")
        await page.wait_for_text("the reply failed")
        await page.send("second")  # the failed exchange is no turn of the history
        await page.wait_for_text("echo (0 turns before): second")


async def test_a_reply_cut_at_the_length_limit_says_so() -> None:
    async with app_on(mock_engine("x" * 100, max_tokens=64, reply_tokens=20)) as app:
        page = app.open_page()
        await page.connect()
        await page.send("long please")
        reply = await page.wait_for_text("cut at the limit of 20 tokens")
        assert reply.startswith("x" * 20) and "x" * 21 not in reply


async def test_a_reply_without_text_says_so() -> None:
    async with app_on(mock_engine([])) as app:
        page = app.open_page()
        await page.connect()
        await page.send("anything")
        await page.wait_for_text("The model wrote no text")


async def test_the_demo_model_is_announced_when_the_chat_opens() -> None:
    engine = MockEngine(model=MockModel(is_demo=True))
    async with app_on(engine) as app:
        page = app.open_page(language="zh-CN")
        await page.connect()
        await page.wait_for_text("演示模型")


async def test_starters_come_in_the_browsers_language() -> None:
    chinese = await handlers.starters(language="zh-CN")
    english = await handlers.starters(language="en-US")
    assert chinese[0].label == "介绍北京" and english[0].label == "Explain a concept"


async def test_two_tabs_from_two_addresses_get_their_own_replies_at_once() -> None:
    async with app_on(mock_engine(chunk_delay_s=0.01)) as app:
        pages = [app.open_page(address=f"127.0.0.{n}") for n in (2, 3)]
        await asyncio.gather(*(page.connect() for page in pages))
        await asyncio.gather(*(page.send(f"from {n}") for n, page in enumerate(pages)))
        for n, page in enumerate(pages):
            assert [t.split("\n")[0] for t in page.texts()] == [f"echo (0 turns before): from {n}"]


async def test_each_reply_shows_how_much_of_the_context_the_chat_fills() -> None:
    engine = mock_engine("r" * 100, max_model_len=2048, max_tokens=512, reply_tokens=256)
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        await page.send("q" * 100)
        first = await page.wait_for_text("context 200 of 2,048 tokens (10%)")
        assert "will soon be left out" not in first


async def test_a_chat_near_the_context_is_warned_before_old_messages_go_in_chinese() -> None:
    # room for a prompt: 2,048 - 256 = 1,792 tokens; warned from 80 % of it (1,434)
    engine = mock_engine("r" * 250, max_model_len=2048, max_tokens=512, reply_tokens=256)
    async with app_on(engine) as app:
        page = app.open_page(language="zh-CN")
        await page.connect()
        await page.send("q" * 300)  # 550 of 1,792: the meter only
        await page.send("q" * 300)  # 1,100: the meter only
        assert all("很快会省略最早的消息" not in text for text in page.texts())
        assert "上下文 1,100 / 2,048 个词元（54%）" in page.texts()[-1]
        await page.send("q" * 300)  # 1,650: warned
        warned = await page.wait_for_text("很快会省略最早的消息")
        assert "92%（1,650 / 1,792 个词元）" in warned


async def test_a_reply_keeps_its_math_and_its_money_is_not_math() -> None:
    reply = ["价格 $5 和 $10，", "公式 $x^2$ 与 `echo $PATH`"]
    engine = mock_engine(reply)
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        await page.send("math")
        (shown,) = page.texts()
        assert shown.startswith("价格 \\$5 和 \\$10，公式 $x^2$ 与 `echo $PATH`"), shown
        await page.send("again")  # the model's own history holds its words as written
        assert engine.requests[1].history[1].content == "".join(reply)


async def test_app_py_imported_again_keeps_the_first_runtime_and_its_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``chainlit run -w`` imports app.py again: the web app reopens on the engine it has,
    with no settings checked (the running engine holds the GPU's memory the checks measure)
    and no engine built anew."""
    async with app_on(mock_engine()) as app:
        page = app.open_page()
        await page.connect()

        def no_checks() -> None:
            raise AssertionError("the settings were checked again")

        monkeypatch.setattr(web, "_checked_plan", no_checks)
        assert web.open_web_app() is app.runtime
        await page.send("hi")  # the reopened app answers on the first engine
        (reply,) = page.texts()
        assert "tokens" in reply and len(app.engine.requests) == 1
