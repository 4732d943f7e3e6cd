"""The counts in SQLite: in this process (``:memory:``) or in a file a box's processes share.

Each change is one ``BEGIN IMMEDIATE`` transaction (a fraction of a millisecond on a local
disk); nothing inside awaits for real, so no other task of the loop runs in between.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from .schema import statements

__all__ = ["SqliteStore"]


class _SqliteTx:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    async def total(self, sql: str, *args: object) -> int:
        row = self._db.execute(sql, args).fetchone()
        return int(row[0] or 0) if row else 0

    async def row(self, sql: str, *args: object) -> tuple[Any, ...] | None:
        row = self._db.execute(sql, args).fetchone()
        return None if row is None else tuple(row)

    async def rows(self, sql: str, *args: object) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self._db.execute(sql, args).fetchall()]

    async def run(self, sql: str, *args: object) -> None:
        self._db.execute(sql, args)


class SqliteStore:
    """The counts in one SQLite database (see the module's text)."""

    def __init__(self, path: Path | str, *, owner: str) -> None:
        self.owner = owner
        self.clock = time.monotonic  # one box: the processes share its monotonic clock
        # autocommit mode: each ``transaction()`` is one explicit BEGIN IMMEDIATE ... COMMIT
        self._db = sqlite3.connect(path, timeout=10, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # counts, not records: no fsync a commit
        for statement in statements("INTEGER PRIMARY KEY AUTOINCREMENT"):
            self._db.execute(statement)
        self._tx = _SqliteTx(self._db)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[_SqliteTx]:
        if self._db.in_transaction:  # a block awaited something real: a bug to see at once
            raise RuntimeError("a SQLite count's transaction began inside another")
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._tx
        finally:
            self._db.execute("COMMIT")

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[_SqliteTx]:
        yield self._tx

    async def close(self) -> None:
        self._db.close()
