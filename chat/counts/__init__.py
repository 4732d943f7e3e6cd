"""One store for every count the app keeps of its visitors: messages a minute, replies at
once and the line, chats per address, each rate's bucket, sign-in tries and sign-outs.

One interface (``Store``: a transaction with the store's lock held, or a read), one
implementation per backend, chosen by where the counts live:

- ``:memory:``: SQLite in this process (a lone process: ``chainlit run app.py``);
- a file: SQLite on one box, shared by a group's workers (``limits.db`` in its folder);
- ``postgresql://...`` (``ERNIE_COUNTS_URL``): shared by app replicas on several machines.

The counters (``chat.access.turns``, ``.limits``, ``.sessions``, ``.rates``) are written
once over it, in SQL both backends read alike (``?`` marks; PostgreSQL's ``$n`` are made
from them). A change holds the store's one lock (SQLite's ``BEGIN IMMEDIATE``, a
PostgreSQL advisory lock), so a check and its count are one step over every process.

Usage::

    store = open_store(":memory:", owner="lone")   # or a file, or a PostgreSQL URL
    async with store.transaction() as tx:
        if await tx.total("SELECT COUNT(*) FROM counts_sent WHERE visitor = ?", who) < 20:
            await tx.run("INSERT INTO counts_sent VALUES (?, ?)", who, store.clock())
    await forget(store, [store.owner])  # at start: what this process held before
    await keep_alive(store)        # its life long: its rows go when it does

What a process holds (replies running, chats open) is kept under its ``owner``: a process
forgets its own when it starts (a restarted worker had left them), and says it is alive
every ``LEASE_S``; one silent for ``3 * LEASE_S`` (killed, its machine gone) is forgotten
by the others, so no slot stays taken by a reply nobody writes.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "LEASE_S",
    "LIMITS_FILE",
    "Store",
    "Tx",
    "forget",
    "is_postgres",
    "keep_alive",
    "open_store",
    "owner_of",
]

LIMITS_FILE = "limits.db"  # in a group's folder
LEASE_S = 10.0


class Tx(Protocol):
    """Statements inside one transaction (or one read)."""

    async def total(self, sql: str, *args: object) -> int:
        """The query's one number; 0 for no row or NULL."""

    async def row(self, sql: str, *args: object) -> tuple[Any, ...] | None: ...
    async def rows(self, sql: str, *args: object) -> list[tuple[Any, ...]]: ...
    async def run(self, sql: str, *args: object) -> None: ...


class Store(Protocol):
    """Where the counts live. ``owner``: whose rows a worker's are (forgotten when it
    starts again); ``clock``: the time every process of the store shares (one box's
    monotonic clock; the wall clock across machines)."""

    owner: str
    clock: Callable[[], float]

    def transaction(self) -> AbstractAsyncContextManager[Tx]:
        """One change at a time over every process of the store, committed even when the
        block raises (a refused message still counts)."""

    def reading(self) -> AbstractAsyncContextManager[Tx]: ...
    async def close(self) -> None: ...


def is_postgres(where: str | Path) -> bool:
    return str(where).startswith(("postgresql", "postgres:"))


def open_store(where: str | Path, *, owner: str) -> Store:
    """The store at ``where``: ``:memory:``, a SQLite file, or a PostgreSQL URL."""
    if is_postgres(where):
        from .postgres import PostgresStore

        return PostgresStore(str(where), owner=owner)
    from .sqlite import SqliteStore

    return SqliteStore(where, owner=owner)


def owner_of(folder: Path | None, worker: int | None) -> str:
    """A process's name in the store: its machine, its group's folder and its number (the
    same when it starts again); alone, its machine and process id (a replica restarted
    gets a new one: its old rows go with the old lease)."""
    if folder is None or worker is None:
        return f"{socket.gethostname()}:pid {os.getpid()}"
    return f"{socket.gethostname()}:{folder}:{worker}"


async def forget(store: Store, owners: list[str]) -> None:
    """Drop what ``owners`` counted as running (replies, open chats): they ended, and start
    again with nothing running."""
    async with store.transaction() as tx:
        for owner in owners:
            await _drop(tx, owner)


async def _drop(tx: Tx, owner: str) -> None:
    for table in ("counts_tickets", "counts_chats", "counts_owners"):
        await tx.run(f"DELETE FROM {table} WHERE owner = ?", owner)


async def keep_alive(store: Store, every_s: float = LEASE_S) -> None:
    """This process's lease, renewed every ``every_s`` until cancelled; the rows of owners
    silent for three times that are dropped (the process was killed)."""
    while True:
        now = store.clock()
        async with store.transaction() as tx:
            await tx.run(
                "INSERT INTO counts_owners (owner, seen) VALUES (?, ?) "
                "ON CONFLICT (owner) DO UPDATE SET seen = excluded.seen",
                store.owner,
                now,
            )
            silent = "SELECT owner FROM counts_owners WHERE seen < ?"
            for (owner,) in await tx.rows(silent, now - 3 * every_s):
                await _drop(tx, owner)
        await asyncio.sleep(every_s)
