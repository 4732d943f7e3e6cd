"""The chat history's tables: Chainlit's schema, created where missing, ids checked.

Chainlit's layer (``chainlit.data.sql_alchemy``) reads and writes five tables but does
not create them; ``create_schema`` does, on SQLite or PostgreSQL. PostgreSQL's id columns
are UUIDs; SQLite has no such type, so there every id column carries a CHECK on the
UUID's shape. A history file written before those CHECKs is migrated in place (once:
``PRAGMA user_version``); rows whose ids are not UUIDs (only an attack writes such) are
dropped, and the log says how many.

Usage::

    await create_schema(settings.history_url)     # settings.urls gave it its driver
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from .search import create_search
from .shares import SHARES_TABLE

__all__ = ["create_schema"]

logger = logging.getLogger(__name__)

# Chainlit's schema (docs.chainlit.io/data-layers/sqlalchemy, as of Chainlit 2.12, plus
# the step field autoCollapse that 2.12 writes). Types differ by database: SQLite has no
# UUID, JSONB or arrays, and Chainlit writes ids and JSON there as text.
_TYPES = {
    "postgresql": {"uuid": "UUID", "json": "JSONB", "list": "TEXT[]"},
    "sqlite": {"uuid": "TEXT", "json": "TEXT", "list": "TEXT"},
}
_TABLES = {
    "users": """
        "id" {uuid} PRIMARY KEY,
        "identifier" TEXT NOT NULL UNIQUE,
        "metadata" {json} NOT NULL,
        "createdAt" TEXT""",
    "threads": """
        "id" {uuid} PRIMARY KEY,
        "createdAt" TEXT,
        "name" TEXT,
        "userId" {uuid},
        "userIdentifier" TEXT,
        "tags" {list},
        "metadata" {json},
        FOREIGN KEY ("userId") REFERENCES users("id") ON DELETE CASCADE""",
    "steps": """
        "id" {uuid} PRIMARY KEY,
        "name" TEXT NOT NULL,
        "type" TEXT NOT NULL,
        "threadId" {uuid} NOT NULL,
        "parentId" {uuid},
        "streaming" BOOLEAN NOT NULL,
        "waitForAnswer" BOOLEAN,
        "isError" BOOLEAN,
        "metadata" {json},
        "tags" {list},
        "input" TEXT,
        "output" TEXT,
        "createdAt" TEXT,
        "command" TEXT,
        "modes" {json},
        "start" TEXT,
        "end" TEXT,
        "generation" {json},
        "showInput" TEXT,
        "language" TEXT,
        "indent" INT,
        "defaultOpen" BOOLEAN,
        "autoCollapse" BOOLEAN,
        FOREIGN KEY ("threadId") REFERENCES threads("id") ON DELETE CASCADE""",
    "elements": """
        "id" {uuid} PRIMARY KEY,
        "threadId" {uuid},
        "type" TEXT,
        "url" TEXT,
        "chainlitKey" TEXT,
        "name" TEXT NOT NULL,
        "display" TEXT,
        "objectKey" TEXT,
        "size" TEXT,
        "page" INT,
        "language" TEXT,
        "forId" {uuid},
        "mime" TEXT,
        "props" {json},
        FOREIGN KEY ("threadId") REFERENCES threads("id") ON DELETE CASCADE""",
    "feedbacks": """
        "id" {uuid} PRIMARY KEY,
        "forId" {uuid} NOT NULL,
        "threadId" {uuid} NOT NULL,
        "value" INT NOT NULL,
        "comment" TEXT,
        FOREIGN KEY ("threadId") REFERENCES threads("id") ON DELETE CASCADE""",
}
# The id columns, and whether they may be empty.
_IDS = {
    "users": {"id": False},
    "threads": {"id": False, "userId": True},
    "steps": {"id": False, "threadId": False, "parentId": True},
    "elements": {"id": False, "threadId": True, "forId": True},
    "feedbacks": {"id": False, "forId": False, "threadId": False},
}
_HEX = "[0-9a-fA-F]"
UUID_GLOB = "-".join(_HEX * n for n in (8, 4, 4, 4, 12))
SCHEMA_VERSION = 1  # 1: SQLite id columns carry a CHECK on the UUID's shape


def _id_is_uuid(column: str, nullable: bool) -> str:
    shape = f"\"{column}\" GLOB '{UUID_GLOB}'"
    return f'("{column}" IS NULL OR {shape})' if nullable else shape


def _ids_are_uuids(table: str) -> str:
    return " AND ".join(_id_is_uuid(c, nullable) for c, nullable in _IDS[table].items())


def _create(table: str, dialect: str, name: str | None = None) -> str:
    body = _TABLES[table].format(**_TYPES[dialect])
    if dialect == "sqlite":
        body += f",\n        CHECK ({_ids_are_uuids(table)})"
    return f"CREATE TABLE IF NOT EXISTS {name or table} ({body})"


async def _migrate_sqlite(connection: AsyncConnection) -> None:
    """Rebuild tables made without the id CHECKs, keeping every row with UUID ids."""
    for table in _TABLES:
        old = f"{table}_before_id_checks"
        await connection.execute(text(f"ALTER TABLE {table} RENAME TO {old}"))
        await connection.execute(text(_create(table, "sqlite")))
        columns = ", ".join(f'"{c}"' for c in await _columns(connection, old))
        kept = await connection.execute(
            text(
                f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {old} "
                f"WHERE {_ids_are_uuids(table)}"
            )
        )
        total = (await connection.execute(text(f"SELECT COUNT(*) FROM {old}"))).scalar()
        if total != kept.rowcount:
            logger.warning(
                "history: dropped %d %s rows whose ids are not UUIDs",
                (total or 0) - kept.rowcount,
                table,
            )
        await connection.execute(text(f"DROP TABLE {old}"))


async def _columns(connection: AsyncConnection, table: str) -> list[str]:
    rows = await connection.execute(text(f"PRAGMA table_info({table})"))
    return [str(row[1]) for row in rows]


async def _prepare_sqlite(connection: AsyncConnection) -> None:
    # Readers and the writer of another worker do not wait for each other (kept in the file).
    await connection.execute(text("PRAGMA journal_mode=WAL"))
    version = (await connection.execute(text("PRAGMA user_version"))).scalar() or 0
    existing = await connection.execute(
        text("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'threads'")
    )
    if version < SCHEMA_VERSION and existing.first() is not None:
        logger.info("history: adding id checks to the existing tables (schema %d)", SCHEMA_VERSION)
        await _migrate_sqlite(connection)
    await connection.execute(text(f"PRAGMA user_version = {SCHEMA_VERSION}"))


async def _signed_since(connection: AsyncConnection) -> str:
    """When this history began to hold signed exchanges (``chat.conversation.ExchangeSigner``):
    the first start of a version that signs them."""
    await connection.execute(
        text('CREATE TABLE IF NOT EXISTS ernie_meta ("key" TEXT PRIMARY KEY, "value" TEXT)')
    )
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    await connection.execute(
        text(
            "INSERT INTO ernie_meta VALUES ('exchanges_signed_since', :now) ON CONFLICT DO NOTHING"
        ),
        {"now": now},
    )
    since = await connection.execute(
        text('SELECT "value" FROM ernie_meta WHERE "key" = \'exchanges_signed_since\'')
    )
    return str(since.scalar_one())


async def create_schema(url: str) -> str:
    """Create Chainlit's history tables where missing (``url`` from ``database_url``);
    return since when its exchanges are signed."""
    engine = create_async_engine(url)
    dialect = engine.dialect.name
    if dialect == "sqlite":
        Path(engine.url.database or "").parent.mkdir(parents=True, exist_ok=True)
    try:
        async with engine.begin() as connection:
            if dialect == "sqlite":
                await _prepare_sqlite(connection)
            for table in _TABLES:
                await connection.execute(text(_create(table, dialect)))
            await create_search(connection, dialect)
            await connection.execute(text(SHARES_TABLE))
            return await _signed_since(connection)
    finally:
        await engine.dispose()
