"""The limits of a group of workers (``ERNIE_WORKERS``), kept in one SQLite file they share.

A browser stays on its worker, but one user (two browsers, a script) or one address can
reach several: counted in each worker alone, every limit would be N times too wide. The
workers count in one SQLite file in the group's folder instead, each count kept under
the worker that holds it: the launcher forgets a worker's counts when it starts it again
(``forget``), so counts of dead workers never linger. ``Store`` is the file, for
``chat.access.turns`` too. Each check is one short ``BEGIN
IMMEDIATE`` transaction (a fraction of a millisecond on a local disk).

Usage::

    turns = ReplyLine(path, worker=3, core=1, ...)  # replies and their line: chat.access.turns
    chats = SharedChatCount(path, worker=3)
    chats.open(address, most=50)  # False: the address holds ``most`` chats already
    chats.close(address)
    forget(path, workers=[2, 3])  # in the launcher, before it starts workers 2 and 3 again
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .limits import SignInAttempts

__all__ = [
    "LIMITS_FILE",
    "SharedChatCount",
    "SharedSignInAttempts",
    "SharedSignOuts",
    "Store",
    "forget",
]

LIMITS_FILE = "limits.db"  # in the group's folder

SCHEMA = """
CREATE TABLE IF NOT EXISTS sent (user TEXT NOT NULL, at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS sent_by_user ON sent (user, at);
CREATE TABLE IF NOT EXISTS tickets (
  id INTEGER PRIMARY KEY AUTOINCREMENT, user TEXT NOT NULL, worker INTEGER NOT NULL,
  core INTEGER NOT NULL, started REAL
);
CREATE INDEX IF NOT EXISTS tickets_by_core ON tickets (core, started, id);
CREATE INDEX IF NOT EXISTS tickets_by_user ON tickets (user, core, id);
CREATE TABLE IF NOT EXISTS held (core INTEGER NOT NULL, s REAL NOT NULL);
CREATE TABLE IF NOT EXISTS chats (
  address TEXT NOT NULL, worker INTEGER NOT NULL, n INTEGER NOT NULL,
  PRIMARY KEY (address, worker)
);
CREATE TABLE IF NOT EXISTS sign_in_tries (key TEXT NOT NULL, at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS sign_in_tries_by_key ON sign_in_tries (key, at);
CREATE TABLE IF NOT EXISTS sign_outs (
  user TEXT NOT NULL, signed_in_at REAL NOT NULL, until REAL NOT NULL,
  PRIMARY KEY (user, signed_in_at)
);
"""


class Store:
    def __init__(self, path: Path | str, worker: int) -> None:
        self.worker = worker
        # autocommit mode: each ``transaction()`` is one explicit BEGIN IMMEDIATE ... COMMIT
        self._db = sqlite3.connect(path, timeout=10, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # counts, not records: no fsync a commit
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One writer at a time over all the workers; committed even when a limit is hit
        (a refused message still counts)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        finally:
            self._db.execute("COMMIT")

    def total(self, sql: str, *args: object) -> int:
        """The query's one number; 0 for no row (a user with nothing running)."""
        row = self._db.execute(sql, args).fetchone()
        return int(row[0] or 0) if row else 0

    def row(self, sql: str, *args: object) -> tuple[Any, ...]:
        return tuple(self._db.execute(sql, args).fetchone())

    def rows(self, sql: str, *args: object) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self._db.execute(sql, args).fetchall()]

    def run(self, sql: str, *args: object) -> int:
        """Run one statement; the new row's id (an INSERT's)."""
        return int(self._db.execute(sql, args).lastrowid or 0)


class SharedChatCount:
    """Chats open per client address over every worker (``chat.access.sessions``)."""

    def __init__(self, path: Path, *, worker: int) -> None:
        self._store = Store(path, worker)

    def open(self, address: str, *, most: int) -> bool:
        """Count a chat of ``address``; False (not counted) if it holds ``most`` already."""
        store = self._store
        with store.transaction() as db:
            if store.total("SELECT SUM(n) FROM chats WHERE address = ?", address) >= most:
                return False
            db.execute(
                "INSERT INTO chats (address, worker, n) VALUES (?, ?, 1) "
                "ON CONFLICT (address, worker) DO UPDATE SET n = n + 1",
                (address, store.worker),
            )
            return True

    def close(self, address: str) -> None:
        with self._store.transaction() as db:
            mine = (address, self._store.worker)
            db.execute("UPDATE chats SET n = n - 1 WHERE address = ? AND worker = ?", mine)
            db.execute("DELETE FROM chats WHERE n <= 0")


class SharedSignInAttempts:
    """``chat.access.limits.SignInAttempts`` over every worker of the group: a guess is
    counted once, whichever worker checks it."""

    def __init__(
        self, path: Path, *, max_failures: int = 10, window_s: float = 300.0, slowest_s: float = 8.0
    ) -> None:
        self._store = Store(path, -1)
        self._max_failures = max_failures
        self._window_s = window_s
        self._slowest_s = slowest_s

    def _count(self, key: str) -> int:
        return self._store.total("SELECT COUNT(*) FROM sign_in_tries WHERE key = ?", key)

    def begin(self, name: str, address: str, *, now: float) -> bool:
        """As ``SignInAttempts.begin``, in one transaction over the group."""
        keys = SignInAttempts.keys(name, address)
        with self._store.transaction() as db:
            db.execute("DELETE FROM sign_in_tries WHERE at <= ?", (now - self._window_s,))
            if max(self._count(keys[0]), self._count(keys[1])) >= self._max_failures:
                return False
            db.executemany("INSERT INTO sign_in_tries VALUES (?, ?)", [(k, now) for k in keys])
            return True

    def succeeded(self, name: str, address: str) -> None:
        newest = (
            "DELETE FROM sign_in_tries WHERE rowid = "
            "(SELECT rowid FROM sign_in_tries WHERE key = ? ORDER BY at DESC LIMIT 1)"
        )
        with self._store.transaction() as db:
            db.executemany(newest, [(key,) for key in SignInAttempts.keys(name, address)])

    def delay_s(self, name: str, *, now: float) -> float:
        failures = self._store.total(
            "SELECT COUNT(*) FROM sign_in_tries WHERE key = ? AND at > ?",
            SignInAttempts.keys(name, "")[2],
            now - self._window_s,
        )
        return SignInAttempts.delay_for(failures, self._max_failures, self._slowest_s)


class SharedSignOuts:
    """``chat.access.limits.SignOuts`` over every worker of the group."""

    def __init__(self, path: Path) -> None:
        self._store = Store(path, -1)

    def sign_out(self, user: str, signed_in_at: float, *, until: float, now: float) -> None:
        with self._store.transaction() as db:
            db.execute("DELETE FROM sign_outs WHERE until <= ?", (now,))
            db.execute(
                "INSERT OR REPLACE INTO sign_outs VALUES (?, ?, ?)", (user, signed_in_at, until)
            )

    def signed_out(self, user: str, signed_in_at: float) -> bool:
        query = "SELECT COUNT(*) FROM sign_outs WHERE user = ? AND signed_in_at = ?"
        return self._store.total(query, user, signed_in_at) > 0


def forget(path: Path, workers: list[int]) -> None:
    """Drop what ``workers`` counted: they ended, and start again with nothing running."""
    store = Store(path, -1)
    marks = ",".join("?" * len(workers))
    try:
        with store.transaction() as db:
            db.execute(f"DELETE FROM tickets WHERE worker IN ({marks})", workers)
            db.execute(f"DELETE FROM chats WHERE worker IN ({marks})", workers)
    finally:
        store.close()
