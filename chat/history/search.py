"""The sidebar's list of a user's chats, a page at a time, and its search: chats found by
words in any message, Chinese included, only the user's own.

Chainlit's ``list_threads`` loaded every chat of the user (up to 1,000, each with its
messages) at each look of the sidebar and filtered them in Python. Here one query ranks a
page of the user's chats (newest message first; the page after a cursor by keyset) and
only that page's messages are read. A search finds messages by substring, as Chainlit's
did, so Chinese (no spaces between words) is found by any run of its characters:

- SQLite: an FTS5 index with the trigram tokenizer (``steps_search``, kept by triggers):
  a query of three characters or more is looked up in it; a shorter one (two Chinese
  characters are a word) scans the user's own messages.
- PostgreSQL: ``pg_trgm``'s GIN index on the messages serves ``ILIKE`` of three
  characters or more; without the extension (not allowed) the same query scans.

A chat's newest message's time is kept on its row (``"lastAt"``, set by a trigger on
``steps``), so that a page of the list is an index's range, not an aggregate over every
chat of the user (90 ms a page at 10,000 chats on SQLite, before). ``python -m
bench.search`` measures it on 10,000 chats.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from chainlit.types import PageInfo, PaginatedResponse, Pagination, ThreadFilter
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from ..chainlit_door import sql_rows
from .thread_query import THREAD_COLUMNS, with_steps

if TYPE_CHECKING:
    from chainlit.data.sql_alchemy import SQLAlchemyDataLayer

__all__ = ["SEARCH_CHARS", "create_search", "listed_threads"]

logger = logging.getLogger(__name__)

SEARCH_CHARS = 200  # a query longer than any a person types is cut here
TRIGRAM = 3  # the shortest query an index serves

LAST_AT = 'COALESCE(t."lastAt", t."createdAt", \'\')'  # a chat's place in the list
_INDEXES = (
    'CREATE INDEX IF NOT EXISTS steps_by_thread ON steps ("threadId", "createdAt")',
    "CREATE INDEX IF NOT EXISTS threads_by_last ON threads "
    '("userId", (COALESCE("lastAt", "createdAt", \'\')) DESC, "id")',
    'CREATE INDEX IF NOT EXISTS feedbacks_by_step ON feedbacks ("forId")',
)
_LAST_AT_SET = (
    'UPDATE threads SET "lastAt" = {new}."createdAt" WHERE "id" = {new}."threadId" '
    'AND COALESCE("lastAt", \'\') < {new}."createdAt"'
)
_LAST_AT = {
    "sqlite": tuple(
        f"CREATE TRIGGER IF NOT EXISTS threads_last_at_{event} AFTER {on} ON steps BEGIN "
        f"{_LAST_AT_SET.format(new='new')}; END"
        for event, on in (("insert", "INSERT"), ("update", 'UPDATE OF "createdAt"'))
    ),
    "postgresql": (
        "CREATE OR REPLACE FUNCTION ernie_thread_last_at() RETURNS trigger LANGUAGE plpgsql "
        f"AS $$ BEGIN {_LAST_AT_SET.format(new='NEW')}; RETURN NULL; END $$",
        "DROP TRIGGER IF EXISTS threads_last_at ON steps",
        'CREATE TRIGGER threads_last_at AFTER INSERT OR UPDATE OF "createdAt" ON steps '
        "FOR EACH ROW EXECUTE FUNCTION ernie_thread_last_at()",
    ),
}
_HAS_LAST_AT = {
    "sqlite": "SELECT COUNT(*) FROM pragma_table_info('threads') WHERE name = 'lastAt'",
    "postgresql": "SELECT COUNT(*) FROM information_schema.columns "
    "WHERE table_schema = current_schema() AND table_name = 'threads' "
    "AND column_name = 'lastAt'",
}
_SQLITE = (
    "CREATE VIRTUAL TABLE steps_search USING fts5("
    "output, content='steps', content_rowid='rowid', tokenize='trigram')",
    "CREATE TRIGGER IF NOT EXISTS steps_search_insert AFTER INSERT ON steps BEGIN "
    "INSERT INTO steps_search(rowid, output) VALUES (new.rowid, new.output); END",
    "CREATE TRIGGER IF NOT EXISTS steps_search_delete AFTER DELETE ON steps BEGIN "
    "INSERT INTO steps_search(steps_search, rowid, output) VALUES ('delete', old.rowid, "
    "old.output); END",
    "CREATE TRIGGER IF NOT EXISTS steps_search_update AFTER UPDATE OF output ON steps BEGIN "
    "INSERT INTO steps_search(steps_search, rowid, output) VALUES ('delete', old.rowid, "
    "old.output); INSERT INTO steps_search(rowid, output) VALUES (new.rowid, new.output); END",
    "INSERT INTO steps_search(steps_search) VALUES ('rebuild')",  # what was kept before it
)
_POSTGRES = (
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    'CREATE INDEX IF NOT EXISTS steps_output_trgm ON steps USING gin ("output" gin_trgm_ops)',
)


async def _keep_last_at(connection: AsyncConnection, dialect: str) -> None:
    """``threads."lastAt"``, added to a history made without it (its chats' newest
    messages' times written in), and the trigger that keeps it."""
    if not (await connection.execute(text(_HAS_LAST_AT[dialect]))).scalar():
        await connection.execute(text('ALTER TABLE threads ADD COLUMN "lastAt" TEXT'))
        await connection.execute(
            text(
                'UPDATE threads SET "lastAt" = (SELECT MAX(s."createdAt") FROM steps s '
                'WHERE s."threadId" = threads."id")'
            )
        )
    for statement in _LAST_AT[dialect]:
        await connection.execute(text(statement))


async def create_search(connection: AsyncConnection, dialect: str) -> None:
    """The indexes the list and its search read (made where missing)."""
    await _keep_last_at(connection, dialect)
    for statement in _INDEXES:
        await connection.execute(text(statement))
    if dialect == "sqlite":
        found = await connection.execute(
            text("SELECT 1 FROM sqlite_master WHERE name = 'steps_search'")
        )
        if found.first() is None:
            for statement in _SQLITE:
                await connection.execute(text(statement))
        return
    try:
        async with connection.begin_nested():
            for statement in _POSTGRES:
                await connection.execute(text(statement))
    except Exception as exc:  # the extension is the database owner's to allow
        logger.warning("history: no pg_trgm index, search scans the messages (%s)", exc)


def _like(query: str) -> str:
    """``query`` as a LIKE pattern of a substring (its own wildcards taken literally)."""
    escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _match(dialect: str, query: str) -> tuple[str, dict[str, Any]]:
    """The condition on a chat ``t`` that one of its messages holds ``query``."""
    if dialect == "sqlite" and len(query) >= TRIGRAM:
        found = (
            'SELECT s."threadId" FROM steps s WHERE s.rowid IN '
            "(SELECT rowid FROM steps_search WHERE steps_search MATCH :phrase)"
        )
        return f't."id" IN ({found})', {"phrase": '"' + query.replace('"', '""') + '"'}
    like = "ILIKE" if dialect == "postgresql" else "LIKE"
    found = f'SELECT s."threadId" FROM steps s WHERE s."output" {like} :pattern ESCAPE \'\\\''
    return f't."id" IN ({found})', {"pattern": _like(query)}


def _page_query(dialect: str, filters: ThreadFilter, cursor: bool) -> tuple[str, dict[str, Any]]:
    conditions = ['t."userId" = :user_id']
    values: dict[str, Any] = {"user_id": filters.userId}
    search = (filters.search or "").strip()[:SEARCH_CHARS]
    if search:
        condition, more = _match(dialect, search)
        conditions.append(condition)
        values |= more
    if filters.feedback is not None:
        conditions.append('t."id" IN (SELECT f."threadId" FROM feedbacks f WHERE f."value" = :fb)')
        values["fb"] = int(filters.feedback)
    if cursor:
        conditions.append(f'({LAST_AT} < :at OR ({LAST_AT} = :at AND t."id" > :cursor))')
    query = (
        f'SELECT {THREAD_COLUMNS}, {LAST_AT} AS "updatedAt" FROM threads t '
        f'WHERE {" AND ".join(conditions)} ORDER BY {LAST_AT} DESC, t."id" LIMIT :limit'
    )
    return query, values


async def listed_threads(
    layer: SQLAlchemyDataLayer, pagination: Pagination, filters: ThreadFilter
) -> PaginatedResponse[Any]:
    """A page of the user's chats (``filters.userId``, set by Chainlit from the request's
    user), newest first, those a search or a feedback names only."""
    if not filters.userId:
        raise ValueError("userId is required")
    dialect = layer.engine.dialect.name
    values: dict[str, Any] = {"limit": pagination.first + 1}
    if pagination.cursor:
        at = await sql_rows(
            layer,
            text(
                f'SELECT {LAST_AT} AS "at" FROM threads t '
                'WHERE t."id" = :cursor AND t."userId" = :user_id'
            ),
            cursor=pagination.cursor,
            user_id=filters.userId,
        )
        values |= {"at": at[0]["at"] if at else "", "cursor": pagination.cursor}
    query, more = _page_query(dialect, filters, cursor=bool(pagination.cursor))
    rows = await sql_rows(layer, text(query), **values, **more)
    page = await with_steps(layer, rows[: pagination.first])
    info = PageInfo(
        hasNextPage=len(rows) > pagination.first,
        startCursor=page[0]["id"] if page else None,
        endCursor=page[-1]["id"] if page else None,
    )
    return PaginatedResponse(pageInfo=info, data=page)
