"""Chat history: where Chainlit's SQLAlchemy data layer keeps signed-in users' chats.

Chainlit's layer (``chainlit.data.sql_alchemy``) reads and writes five tables but does
not create them; ``create_schema`` does, on SQLite or PostgreSQL, and changes nothing
that exists. The URL is the settings' (``deploy.database`` gave it its async driver).

Usage::

    await create_schema(settings.history_url)
    layer = SQLAlchemyDataLayer(conninfo=settings.history_url)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import chainlit as cl
from chainlit.data.sql_alchemy import SQLAlchemyDataLayer
from chainlit.types import ThreadDict
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

__all__ = ["create_schema", "register"]

# Chainlit's schema (docs.chainlit.io/data-layers/sqlalchemy, as of Chainlit 2.12, plus
# the step field autoCollapse that 2.12 writes). Types differ by database: SQLite has no
# UUID, JSONB or arrays, and Chainlit writes ids and JSON there as text.
_TYPES = {
    "postgresql": {"uuid": "UUID", "json": "JSONB", "list": "TEXT[]"},
    "sqlite": {"uuid": "TEXT", "json": "TEXT", "list": "TEXT"},
}
_TABLES = (
    """CREATE TABLE IF NOT EXISTS users (
        "id" {uuid} PRIMARY KEY,
        "identifier" TEXT NOT NULL UNIQUE,
        "metadata" {json} NOT NULL,
        "createdAt" TEXT)""",
    """CREATE TABLE IF NOT EXISTS threads (
        "id" {uuid} PRIMARY KEY,
        "createdAt" TEXT,
        "name" TEXT,
        "userId" {uuid},
        "userIdentifier" TEXT,
        "tags" {list},
        "metadata" {json},
        FOREIGN KEY ("userId") REFERENCES users("id") ON DELETE CASCADE)""",
    """CREATE TABLE IF NOT EXISTS steps (
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
        FOREIGN KEY ("threadId") REFERENCES threads("id") ON DELETE CASCADE)""",
    """CREATE TABLE IF NOT EXISTS elements (
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
        FOREIGN KEY ("threadId") REFERENCES threads("id") ON DELETE CASCADE)""",
    """CREATE TABLE IF NOT EXISTS feedbacks (
        "id" {uuid} PRIMARY KEY,
        "forId" {uuid} NOT NULL,
        "threadId" {uuid} NOT NULL,
        "value" INT NOT NULL,
        "comment" TEXT,
        FOREIGN KEY ("threadId") REFERENCES threads("id") ON DELETE CASCADE)""",
)


async def create_schema(url: str) -> None:
    """Create Chainlit's history tables where missing (``url`` from ``database_url``)."""
    engine = create_async_engine(url)
    types = _TYPES[engine.dialect.name]
    if engine.dialect.name == "sqlite":
        Path(engine.url.database or "").parent.mkdir(parents=True, exist_ok=True)
    try:
        async with engine.begin() as connection:
            for table in _TABLES:
                await connection.execute(text(table.format(**types)))
    finally:
        await engine.dispose()


def register(url: str, resume: Callable[[ThreadDict], Awaitable[None]]) -> str:
    """Keep chats in the database at ``url``, and resume them with ``resume``."""

    @cl.data_layer
    def chat_history() -> SQLAlchemyDataLayer:
        return SQLAlchemyDataLayer(conninfo=url)

    cl.on_chat_resume(resume)
    return url
