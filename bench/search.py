"""``python -m bench.search``: the sidebar's list and its search on 10,000 chats, as the
app answers it (``chat.history.search``) beside Chainlit's own ``list_threads`` (every
chat of the user loaded, up to 1,000, and filtered in Python), in one invocation.

One user holds N chats of four messages each (Chinese, with a few rare words), another
user as many; each query is asked ``--repeat`` times and its median printed in ms:
the first page, a page 30 pages deep, a search of two characters (a scan of the user's
messages), one of four (the trigram index), and a word in no chat.

Usage::

    python -m bench.search [--chats 10000] [--postgres postgresql://postgres@127.0.0.1/x]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from chainlit.data.sql_alchemy import SQLAlchemyDataLayer
from chainlit.types import Pagination, ThreadFilter
from sqlalchemy import text

from chat.history.data_layer import SafeDataLayer
from chat.history.schema import create_schema
from settings.urls import database_url

WORDS = ["天气", "北京", "上海", "学习", "工作", "电影", "音乐", "旅行", "做饭", "健康"]
QUERIES = {"two characters": "小花", "four characters": "猫叫小花", "no chat": "火星基地"}


async def _seed(layer: SafeDataLayer, chats: int) -> str:
    """Two users with ``chats`` chats each; the first one's id."""
    ident: Any = uuid.UUID if layer.engine.dialect.name == "postgresql" else str
    users = [str(uuid.uuid4()) for _ in range(2)]
    async with layer.engine.begin() as db:
        for n, user in enumerate(users):
            await db.execute(
                text("INSERT INTO users (id, identifier, metadata) VALUES (:id, :name, '{}')"),
                {"id": ident(user), "name": f"user{n}"},
            )
        threads, steps = [], []
        for n in range(chats * 2):
            thread, words = str(uuid.uuid4()), WORDS[n % len(WORDS)]
            threads.append({"id": ident(thread), "user": ident(users[n % 2]), "name": words})
            rare = "我的猫叫小花。" if n % 1000 == 0 else ""
            for m in range(4):
                steps.append(
                    {
                        "id": ident(str(uuid.uuid4())),
                        "thread": ident(thread),
                        "output": f"{rare}关于{words}的第 {m} 条消息，编号 {n}。",
                        "at": f"2026-{1 + n // 2000 % 12:02d}-01T00:"
                        f"{n // 60 % 60:02d}:{n % 60:02d}.{m:06d}Z",
                    }
                )
        await db.execute(
            text('INSERT INTO threads (id, "userId", name) VALUES (:id, :user, :name)'), threads
        )
        await db.execute(
            text(
                'INSERT INTO steps (id, name, type, "threadId", streaming, output, "createdAt") '
                "VALUES (:id, 'x', 'user_message', :thread, false, :output, :at)"
            ),
            steps,
        )
    return users[0]


async def _median_ms(call: Any, repeat: int) -> float:
    took = []
    for _ in range(repeat):
        started = time.perf_counter()
        await call()
        took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took)


async def _measure(url: str, chats: int, repeat: int) -> list[tuple[str, float, float]]:
    await create_schema(url)
    layer = SafeDataLayer(conninfo=url)
    user = await _seed(layer, chats)
    deep = None
    for _ in range(30):  # the cursor 30 pages down
        page = await layer.list_threads(
            Pagination(first=20, cursor=deep), ThreadFilter(userId=user)
        )
        deep = page.pageInfo.endCursor
    asks = {"first page": (None, None), "page 31": (None, deep)}
    asks |= {name: (query, None) for name, query in QUERIES.items()}
    rows = []
    for name, (query, cursor) in asks.items():
        page, filters = Pagination(first=20, cursor=cursor), ThreadFilter(userId=user, search=query)
        now = await _median_ms(lambda p=page, f=filters: layer.list_threads(p, f), repeat)
        chainlit = await _median_ms(
            lambda p=page, f=filters: SQLAlchemyDataLayer.list_threads(layer, p, f), repeat
        )
        rows.append((name, now, chainlit))
    await layer.engine.dispose()
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.search", description=__doc__)
    parser.add_argument("--chats", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--postgres", help="an empty PostgreSQL database's URL, to measure too")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        urls = {"sqlite": f"sqlite:///{Path(folder) / 'history.db'}"}
        if args.postgres:
            urls["postgresql"] = args.postgres
        print(f"{args.chats:,} chats a user, 4 messages each; median of {args.repeat} (ms)")
        print("| database | query | the app | Chainlit's list_threads | ratio |")
        print("|---|---|---:|---:|---:|")
        for name, url in urls.items():
            for query, now, chainlit in asyncio.run(
                _measure(database_url(url), args.chats, args.repeat)
            ):
                print(f"| {name} | {query} | {now:.1f} | {chainlit:.1f} | {chainlit / now:.1f} x |")


if __name__ == "__main__":
    main()
