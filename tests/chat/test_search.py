"""The sidebar's list and its search (``chat.history.search``) on the data layer itself,
on SQLite (FTS5, trigram) and PostgreSQL (pg_trgm): Chinese found by any run of its
characters, short or long, only the user's own chats, a page at a time, newest first;
and the shared links' records (``chat.history.shares``): ended, stopped, the owner's."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from chainlit.types import Pagination, ThreadFilter
from sqlalchemy import text

from chat.history.data_layer import SafeDataLayer
from chat.history.schema import create_schema
from chat.history.shares import create_share, read_share, stop_shares
from settings.urls import database_url
from testing.history import new_database
from testing.programs import needs


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=needs("initdb", "postgresql"))])
async def layer(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SafeDataLayer]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'history.db'}"
    else:
        url = await new_database(request.getfixturevalue("postgres_url"), f"s_{uuid.uuid4().hex}")
    url = database_url(url)
    await create_schema(url)
    made = SafeDataLayer(conninfo=url)
    yield made
    await made.engine.dispose()


def ident(layer: SafeDataLayer, value: str) -> Any:
    """An id as the database's driver binds it (asyncpg: a UUID column's value as one)."""
    return uuid.UUID(value) if layer.engine.dialect.name == "postgresql" else value


async def seed(layer: SafeDataLayer, user: str, chats: list[list[str]]) -> tuple[str, list[str]]:
    """A user and ``chats`` (each its messages' texts), the first oldest; the user's id and
    the chats' ids."""
    user_id, ids = str(uuid.uuid4()), [str(uuid.uuid4()) for _ in chats]
    async with layer.engine.begin() as db:
        await db.execute(
            text('INSERT INTO users ("id", "identifier", "metadata") VALUES (:id, :name, \'{}\')'),
            {"id": ident(layer, user_id), "name": user},
        )
        for n, (thread, texts) in enumerate(zip(ids, chats, strict=True)):
            await db.execute(
                text('INSERT INTO threads ("id", "userId", "name") VALUES (:id, :user, :name)'),
                {"id": ident(layer, thread), "user": ident(layer, user_id), "name": texts[0][:20]},
            )
            for m, said in enumerate(texts):
                await db.execute(
                    text(
                        'INSERT INTO steps ("id", "name", "type", "threadId", "streaming", '
                        "\"output\", \"createdAt\") VALUES (:id, 'x', 'user_message', :thread, "
                        "false, :output, :at)"
                    ),
                    {
                        "id": ident(layer, str(uuid.uuid4())),
                        "thread": ident(layer, thread),
                        "output": said,
                        "at": f"2026-12-{1 + n // 24:02d}T{n % 24:02d}:00:{m:02d}.000000Z",
                    },
                )
    return user_id, ids


async def found(
    layer: SafeDataLayer, user_id: str, search: str | None = None, **page: Any
) -> list[str]:
    listed = await layer.list_threads(
        Pagination(first=page.get("first", 20), cursor=page.get("cursor")),
        ThreadFilter(userId=user_id, search=search),
    )
    return [thread["id"] for thread in listed.data]


CHATS = [
    ["我的猫叫小花，它很可爱。", "小花喜欢晒太阳。"],
    ["今天北京天气怎么样？", "北京今天晴。"],
    ["How do I cook rice?", "Rinse it, then 1:1.2 water."],
    ["打折 50% 的商品", "好的"],
]


async def test_chinese_is_found_by_any_run_of_its_characters_in_the_users_own_chats(
    layer: SafeDataLayer,
) -> None:
    alice, (cat, weather, rice, sale) = await seed(layer, "alice", CHATS)
    await seed(layer, "bob", [["我的猫叫小花"], ["北京天气"]])  # the same words: not hers
    assert await found(layer, alice, "小花") == [cat]  # two characters: a scan of hers
    assert await found(layer, alice, "猫叫小花") == [cat]  # an index's lookup
    assert await found(layer, alice, "北京今天晴") == [weather]  # in a reply, too
    assert await found(layer, alice, "RICE") == [rice]  # case does not matter
    assert await found(layer, alice, "50%") == [sale] and await found(layer, alice, "%") == [sale]
    assert await found(layer, alice, "上海") == []
    assert set(await found(layer, alice)) == {cat, weather, rice, sale}


async def test_the_list_is_a_page_at_a_time_newest_first(layer: SafeDataLayer) -> None:
    user, ids = await seed(layer, "carol", [[f"第 {n} 个对话"] for n in range(7)])
    newest_first, cursor, pages = list(reversed(ids)), None, []
    while True:
        listed = await layer.list_threads(
            Pagination(first=3, cursor=cursor), ThreadFilter(userId=user)
        )
        pages.append([thread["id"] for thread in listed.data])
        if not listed.pageInfo.hasNextPage:
            break
        cursor = listed.pageInfo.endCursor
    assert pages == [newest_first[:3], newest_first[3:6], newest_first[6:]]


OLDER_HISTORY = {  # what a history made before the list kept a chat's newest time lacks
    "sqlite": (
        "DROP TRIGGER threads_last_at_insert",
        "DROP TRIGGER threads_last_at_update",
        "DROP INDEX threads_by_last",
        'ALTER TABLE threads DROP COLUMN "lastAt"',
    ),
    "postgresql": (
        "DROP FUNCTION ernie_thread_last_at() CASCADE",
        'ALTER TABLE threads DROP COLUMN "lastAt" CASCADE',
    ),
}


async def test_an_older_history_lists_its_chats_by_their_newest_message(
    layer: SafeDataLayer,
) -> None:
    """Its chats' newest times are written in at start, and kept from then on."""
    async with layer.engine.begin() as db:
        for statement in OLDER_HISTORY[layer.engine.dialect.name]:
            await db.execute(text(statement))
    user, (old, new) = await seed(layer, "olga", [["旧的对话", "旧的回复"], ["新的对话"]])
    await create_schema(layer.engine.url.render_as_string(hide_password=False))
    async with layer.engine.connect() as db:
        kept = await db.execute(text('SELECT "id", "lastAt" FROM threads'))
        newest = {str(chat_id): at for chat_id, at in kept}
    assert newest == {
        new: "2026-12-01T01:00:00.000000Z",  # its one message's time
        old: "2026-12-01T00:00:01.000000Z",  # its reply's
    }
    assert await found(layer, user) == [new, old]
    async with layer.engine.begin() as db:  # the old chat goes on
        await db.execute(
            text(
                'INSERT INTO steps ("id", "name", "type", "threadId", "streaming", "output", '
                "\"createdAt\") VALUES (:id, 'x', 'user_message', :thread, false, '又来了', "
                "'2027-01-01T00:00:00.000000Z')"
            ),
            {"id": ident(layer, str(uuid.uuid4())), "thread": ident(layer, old)},
        )
    assert await found(layer, user) == [old, new]


async def test_an_edited_or_deleted_message_is_found_as_it_is_now(layer: SafeDataLayer) -> None:
    user, (chat,) = await seed(layer, "dave", [["原来的话题：红烧肉"]])
    async with layer.engine.begin() as db:
        await db.execute(text("UPDATE steps SET \"output\" = '改过的话题：清蒸鱼'"))
    assert await found(layer, user, "红烧肉") == [] and await found(layer, user, "清蒸鱼") == [chat]
    await layer.delete_thread(chat)
    assert await found(layer, user, "清蒸鱼") == []


async def test_a_shared_link_ends_and_is_stopped_by_its_owner_only(layer: SafeDataLayer) -> None:
    _, (chat,) = await seed(layer, "erin", [["分享这个"]])
    live = await create_share(layer, chat, "erin", "[]", days=1)
    ended = await create_share(layer, chat, "erin", "[]", days=1e-9)
    assert await read_share(layer, live) is not None and await read_share(layer, ended) is None
    assert await read_share(layer, "x" * 32) is None and await read_share(layer, "") is None
    assert await stop_shares(layer, chat, "mallory") == 0  # not his links to stop
    assert await read_share(layer, live) is not None
    assert await stop_shares(layer, chat, "erin") == 1
    assert await read_share(layer, live) is None
