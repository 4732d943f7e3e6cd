"""What a chat writes into the history, on the mock engine and a real SQLite file: the
thread is the signed-in user's, each exchange is stored once and signed, and a resumed
chat gives the model its turns back."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from chainlit.user import PersistedUser, User

from chat.access.peers import REQUEST_USER
from chat.chainlit_door import using_data_layer
from chat.conversation import Conversation
from chat.history.data_layer import SafeDataLayer
from chat.history.schema import create_schema
from settings.urls import database_url
from testing.in_process import app_on, mock_engine
from testing.polling import until


@pytest.fixture
async def layer(tmp_path: Path) -> AsyncIterator[SafeDataLayer]:
    url = database_url(f"sqlite:///{tmp_path / 'history.db'}")
    await create_schema(url)
    history = SafeDataLayer(conninfo=url)
    with using_data_layer(history):
        yield history


async def user(layer: SafeDataLayer, name: str) -> PersistedUser:
    persisted = await layer.create_user(User(identifier=name))
    assert persisted is not None
    return persisted


async def stored_steps(layer: SafeDataLayer, owner: str, thread_id: str, count: int) -> Any:
    """The thread's steps once ``count`` messages are stored (Chainlit writes in tasks)."""

    async def steps() -> Any:
        token = REQUEST_USER.set(owner)
        try:
            thread = await layer.get_thread(thread_id)
        finally:
            REQUEST_USER.reset(token)
        kept = [s for s in (thread or {}).get("steps", []) if "message" in s["type"]]
        return kept if len(kept) >= count else None

    return await until(steps, 5, f"{count} stored messages")


async def test_each_exchange_is_stored_once_signed_in_the_users_thread(
    layer: SafeDataLayer,
) -> None:
    alice = await user(layer, "alice")
    async with app_on(mock_engine(["你好！"])) as app:
        page = app.open_page(user=alice)
        await page.connect()
        await page.send("第一句")
        await page.send("第二句")
        thread_id = page.session.thread_id
        steps = await stored_steps(layer, "alice", thread_id, 4)
        assert await layer.get_thread_author(thread_id) == "alice"
        outputs = [(s["type"], s["output"].split("\n")[0]) for s in steps]
        assert outputs == [
            ("user_message", "第一句"),
            ("assistant_message", "你好！"),
            ("user_message", "第二句"),
            ("assistant_message", "你好！"),
        ]
        turns = Conversation.restore(steps, app.runtime.seal).turns()
        assert [t.content for t in turns] == ["第一句", "你好！", "第二句", "你好！"]


async def test_another_users_socket_writes_nothing_into_a_thread_and_reads_none(
    layer: SafeDataLayer,
) -> None:
    alice, bob = await user(layer, "alice"), await user(layer, "bob")
    async with app_on(mock_engine()) as app:
        page = app.open_page(user=alice)
        await page.connect()
        await page.send("alice's secret")
        thread_id = page.session.thread_id
        await stored_steps(layer, "alice", thread_id, 2)
        # A session holding her chat's id (the connect's claim, chat.history.claims,
        # gives none: this is the data layer's own check, below it).
        intruder = app.open_page(user=bob, thread_id=thread_id, address="127.0.0.3")
        await intruder.connect()
        await intruder.send("bob was here")
        steps = await stored_steps(layer, "alice", thread_id, 2)
        assert not any("bob" in s["output"] for s in steps)
        token = REQUEST_USER.set("bob")
        try:  # her chat reads as none to him
            assert await layer.get_thread(thread_id) is None
        finally:
            REQUEST_USER.reset(token)
    assert await layer.get_all_user_threads(bob.id) == []
    threads = await layer.get_all_user_threads(alice.id)
    assert [t["id"] for t in threads or []] == [thread_id]


async def test_a_refused_message_leaves_nothing_in_the_history(layer: SafeDataLayer) -> None:
    alice = await user(layer, "alice")
    async with app_on(mock_engine(max_message_chars=5)) as app:
        page = app.open_page(user=alice)
        await page.connect()
        await page.send("far too long")
        await page.send("ok")
        steps = await stored_steps(layer, "alice", page.session.thread_id, 2)
        assert steps[0]["output"] == "ok"
        assert not any("too long" in s["output"] for s in steps)


async def test_a_read_right_after_a_reply_sees_the_whole_exchange(layer: SafeDataLayer) -> None:
    """Chainlit writes a chat in tasks it does not wait for: the Share button pressed as a
    reply ended found no owner, or no reply."""
    alice = await user(layer, "alice")
    async with app_on(mock_engine(["答"])) as app:
        page = app.open_page(user=alice)
        await page.connect()
        await page.send("问")
        token = REQUEST_USER.set("alice")
        try:
            author = await layer.author_of(page.session.thread_id)
            thread = await layer.get_thread(page.session.thread_id)
        finally:
            REQUEST_USER.reset(token)
    assert author == "alice" and thread is not None
    steps = [s for s in thread["steps"] if "message" in s["type"]]
    kept = [(s["type"], s["output"].split("\n")[0]) for s in steps]
    assert kept == [("user_message", "问"), ("assistant_message", "答")]


async def test_a_write_waits_for_another_workers_lock(layer: SafeDataLayer) -> None:
    """Another worker holds the file's lock past SQLite's 5 s: the write waits its turn
    (Chainlit's layer dropped it, "database is locked", with a warning)."""
    alice = await user(layer, "alice")
    thread_id = str(uuid.uuid4())
    other = sqlite3.connect(layer.engine.url.database or "", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # its write under way
    write = asyncio.create_task(layer.update_thread(thread_id, name="问", user_id=alice.id))
    await asyncio.sleep(5.5)
    other.execute("COMMIT")
    other.close()
    await write
    assert await layer.get_thread_author(thread_id) == "alice"
