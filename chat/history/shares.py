"""Read-only links to a chat, kept in the history's database (``ernie_shares``).

A link's token is 24 random bytes (``secrets``), shown once to its owner and kept only as
its SHA-256, beside the chat it shows, its owner, when it ends and whether its owner
stopped it; what it shows is the chat as it was when shared (a copy of its exchanges),
not the chat as it grows. Nothing in a link names another chat or leads to one.

Usage::

    token = await create_share(layer, thread_id, "alice", entries_json, days=7)
    await stop_shares(layer, thread_id, "alice")      # every link of her chat stops
    shared = await read_share(layer, token)           # (copy, made at), or None
"""

from __future__ import annotations

import hashlib
import secrets
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import text

from ..chainlit_door import sql_rows, sql_run

if TYPE_CHECKING:
    from chainlit.data.sql_alchemy import SQLAlchemyDataLayer

__all__ = ["SHARES_TABLE", "create_share", "read_share", "stop_shares"]

SHARES_TABLE = """CREATE TABLE IF NOT EXISTS ernie_shares (
    "tokenHash" TEXT PRIMARY KEY,
    "threadId" TEXT NOT NULL,
    "userIdentifier" TEXT NOT NULL,
    "createdAt" TEXT NOT NULL,
    "expiresAt" DOUBLE PRECISION NOT NULL,
    "stopped" INT NOT NULL DEFAULT 0,
    "snapshot" TEXT NOT NULL
)"""


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def create_share(
    layer: SQLAlchemyDataLayer, thread_id: str, user: str, snapshot: str, *, days: float
) -> str:
    """A new link to the chat as ``snapshot`` holds it; its token (kept nowhere)."""
    token = secrets.token_urlsafe(24)
    values = {
        "hash": _hash(token),
        "thread": thread_id,
        "user": user,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "ends": time.time() + days * 86400,
        "snapshot": snapshot,
    }
    insert = text(
        'INSERT INTO ernie_shares ("tokenHash", "threadId", "userIdentifier", "createdAt", '
        '"expiresAt", "snapshot") VALUES (:hash, :thread, :user, :at, :ends, :snapshot)'
    )
    await sql_run(layer, insert, **values)
    return token


async def stop_shares(layer: SQLAlchemyDataLayer, thread_id: str, user: str) -> int:
    """Every live link ``user`` made to the chat stops; how many."""
    stop = text(
        'UPDATE ernie_shares SET "stopped" = 1 WHERE "threadId" = :thread '
        'AND "userIdentifier" = :user AND "stopped" = 0 AND "expiresAt" > :now'
    )
    return await sql_run(layer, stop, thread=thread_id, user=user, now=time.time())


async def read_share(layer: SQLAlchemyDataLayer, token: str) -> tuple[str, str] | None:
    """The copy a live link shows, and when it was made; None for a link that is not, has
    ended or was stopped (the same answer for each: a guesser learns nothing)."""
    if not 16 <= len(token) <= 64:
        return None
    rows: list[dict[str, Any]] = await sql_rows(
        layer,
        text(
            'SELECT "snapshot", "createdAt" FROM ernie_shares WHERE "tokenHash" = :hash '
            'AND "stopped" = 0 AND "expiresAt" > :now'
        ),
        hash=_hash(token),
        now=time.time(),
    )
    return (str(rows[0]["snapshot"]), str(rows[0]["createdAt"])) if rows else None
