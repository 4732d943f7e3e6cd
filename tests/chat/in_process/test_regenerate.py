"""Regenerate on the mock engine: the button under the last reply answers that turn again,
the old reply replaced in the chat and in the history; only the last reply has it."""

from __future__ import annotations

from pathlib import Path

from chainlit.user import User

from chat.access.peers import REQUEST_USER
from chat.chainlit_door import using_data_layer
from chat.history.data_layer import SafeDataLayer
from chat.history.schema import create_schema
from settings.urls import database_url
from testing.in_process import app_on, message_payload, mock_engine
from testing.polling import until

REPLIES = iter(f"reply {n}" for n in range(100))


def numbered(history: object, text: str) -> str:
    return next(REPLIES)


async def test_regenerate_answers_the_last_turn_again_in_place_of_its_reply() -> None:
    engine = mock_engine(numbered)
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        await page.send("first")
        await page.send("second")
        before = [t.split("\n")[0] for t in page.texts()]
        await page.click("regenerate")
        after = [t.split("\n")[0] for t in page.texts()]
        assert after[0] == before[0] and after[1] != before[1] and len(after) == 2
        _, second, again = engine.requests
        assert (again.text, again.history) == (second.text, second.history)
        assert [b["label"] for b in page.buttons().values()] == ["Regenerate", "Export"]


async def test_only_the_last_reply_has_the_button_in_chinese() -> None:
    async with app_on(mock_engine()) as app:
        page = app.open_page(language="zh-CN")
        await page.connect()
        await page.send("一")
        await page.send("二")
        buttons = list(page.buttons().values())
        assert [button["label"] for button in buttons] == ["重新生成", "导出"]
        last = page.shown("assistant_message")[-1]["id"]
        assert all(button["forId"] == last for button in buttons)


async def test_regenerate_while_a_reply_is_written_does_nothing() -> None:
    engine = mock_engine(["word "] * 40, chunk_delay_s=0.02)
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        await page.send("one")
        await page.receive("client_message", message_payload("two"))
        await until(lambda: engine.running_requests == 1, 5, "the second reply running")
        await page.click("regenerate")  # the first reply's button, pressed meanwhile
        await page.settled()
        assert [r.text for r in engine.requests] == ["one", "two"]


async def test_a_regenerated_reply_is_counted_in_the_visitors_limits() -> None:
    engine = mock_engine(user_messages_per_minute=2)
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        await page.send("one")
        await page.click("regenerate")
        await page.click("regenerate")  # a third reply in the minute
        await page.wait_for_text("You have sent 2 messages in the last minute")
        assert len(engine.requests) == 2


async def test_the_history_keeps_the_new_reply_and_not_the_old(tmp_path: Path) -> None:
    url = database_url(f"sqlite:///{tmp_path / 'history.db'}")
    await create_schema(url)
    layer = SafeDataLayer(conninfo=url)
    with using_data_layer(layer):
        alice = await layer.create_user(User(identifier="alice"))
        async with app_on(mock_engine(numbered)) as app:
            page = app.open_page(user=alice)
            await page.connect()
            await page.send("hello")
            await page.click("regenerate")
            replies = page.texts()
            token = REQUEST_USER.set("alice")

            async def stored() -> list[str] | None:
                thread = await layer.get_thread(page.session.thread_id)
                steps = (thread or {}).get("steps", [])
                kept = [s["output"] for s in steps if s["type"] == "assistant_message"]
                return kept if kept == replies else None

            try:
                assert await until(stored, 5, "the regenerated reply alone in the history")
            finally:
                REQUEST_USER.reset(token)


async def test_a_stopped_reply_is_the_one_regenerate_answers_again() -> None:
    engine = mock_engine(["word "] * 40, chunk_delay_s=0.02)
    async with app_on(engine) as app:
        page = app.open_page()
        await page.connect()
        engine.chunk_delay_s = 0.0
        await page.send("finished")  # a whole reply, with the buttons
        engine.chunk_delay_s = 0.02
        await page.receive("client_message", message_payload("stopped"))
        await until(lambda: len(page.texts()) == 2, 5, "the second reply streaming")
        await page.receive("stop")
        await page.settled()
        first, stopped = [s for s in page.shown("assistant_message") if "word" in s["output"]]
        assert {b["forId"] for b in page.buttons().values()} == {stopped["id"]}
        await page.click("regenerate")
        assert [r.text for r in engine.requests] == ["finished", "stopped", "stopped"]
        shown = {s["id"] for s in page.shown("assistant_message")}
        assert first["id"] in shown and stopped["id"] not in shown
