"""Chat history: where Chainlit's SQLAlchemy data layer keeps signed-in users' chats.

Chainlit's layer (``chainlit.data.sql_alchemy``) reads and writes five tables but does
not create them; ``create_schema`` does, on SQLite or PostgreSQL, and changes nothing
that exists. ``database_url`` turns the URL an operator writes into the async driver's.

Usage::

    url = database_url("sqlite:///history.db")     # -> sqlite+aiosqlite:///history.db
    await create_schema(url)
    layer = SQLAlchemyDataLayer(conninfo=url)
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import create_async_engine

__all__ = ["HistoryUrlError", "create_schema", "database_url", "redact"]

# The async driver for each database the history supports (all pinned in the locks).
_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}
_ALIASES = {"postgres": "postgresql"}

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


class HistoryUrlError(ValueError):
    """Not a URL of a database the history supports."""


def database_url(url: str) -> str:
    """``url`` with its database's async driver: ``sqlite:///x.db`` or
    ``postgresql://user:pw@host/db`` as written by people, as SQLAlchemy's async engine
    needs them."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise HistoryUrlError(f"not a database URL ({exc})") from None
    backend = _ALIASES.get(parsed.get_backend_name(), parsed.get_backend_name())
    driver = _DRIVERS.get(backend)
    if driver is None:
        raise HistoryUrlError(f"{backend!r} is not SQLite or PostgreSQL")
    if parsed.drivername not in (backend, driver, *(_ALIASES.keys())):
        raise HistoryUrlError(f"driver {parsed.drivername!r}: use {driver} (or leave it out)")
    if backend == "sqlite" and not parsed.database:
        raise HistoryUrlError("a SQLite history needs a file: sqlite:///path/history.db")
    return parsed.set(drivername=driver).render_as_string(hide_password=False)


def redact(url: str) -> str:
    """``url`` without its password, for logs."""
    return make_url(url).render_as_string(hide_password=True)


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
