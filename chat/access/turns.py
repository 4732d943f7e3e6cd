"""Replies at once and the line for them: a visitor's limits, each engine core's slots, and
a fair, bounded line of the messages that wait for one.

One implementation for one process and for a group of workers: the counts live in one
SQLite file the group's workers share (``:memory:`` for a lone process), one short
transaction per change. A message is counted against its visitor (messages a minute,
replies at once: a message waiting in line is one of them), then it gets a *ticket*:
running at once while its engine core has a free slot and nobody waits, else waiting in
that core's line (each core batches on its own, and a browser stays on its worker, so
on its core). A full line refuses politely.

The line is fair across visitors: a ticket's *round* is how many tickets of its visitor
came before it on that core (running or waiting), counted anew at each look, and the
line is ordered by (round, arrival). One visitor's 50 tabs queue behind everyone's first
message, and a visitor whose reply ended has its next message count as a first again;
within a visitor, arrival order holds. A tab's place is its rank in that order less the
slots free now (a freed slot is taken by
the head of the line at its next look: at once on the same worker, within ``LOOK_S`` on
another). The wait is estimated from the core's recent replies: place x mean time a
slot was held / slots.

Usage::

    turns = Turns(":memory:", worker=0, core=0, max_replies=2, per_minute=20, slots=8, line=8)
    ticket = turns.admit("address:10.0.0.7", now=time.monotonic())  # LimitExceededError
    await turns.wait_turn(ticket, show)   # show(Place) while it waits; at once if running
    turns.done(ticket)                    # however it ended: its slot or its place back
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from .. import metrics
from .limits import WINDOW_S, LimitExceededError
from .shared_limits import Store

__all__ = ["LOOK_S", "Place", "Ticket", "Turns"]

LOOK_S = 0.25  # how often a waiting ticket looks at the line (a local release wakes it)
HELD_KEPT = 50  # recent replies per core the wait is estimated from

INSERT = "INSERT INTO tickets VALUES (NULL, ?, ?, ?, ?)"
ROUND = (  # of ticket t: its visitor's tickets before it on its core
    "(SELECT COUNT(*) FROM tickets AS b WHERE b.user = t.user AND b.core = t.core AND b.id < t.id)"
)
WAITING = "SELECT COUNT(*) FROM tickets WHERE core = ? AND started IS NULL"
RUNNING = "SELECT COUNT(*) FROM tickets WHERE core = ? AND started IS NOT NULL"
AHEAD = (  # waiting tickets on the core that come before ticket ?, itself counted
    f"SELECT COUNT(*) FROM tickets AS t, (SELECT {ROUND} AS round, t.id AS id "
    "FROM tickets AS t WHERE t.id = ?) AS me "
    f"WHERE t.core = ? AND t.started IS NULL AND ({ROUND}, t.id) <= (me.round, me.id)"
)


@dataclass
class Ticket:
    """A message's claim on a reply: its row, and whether it runs (``started``)."""

    id: int
    joined: float
    started: float | None = None


@dataclass(frozen=True)
class Place:
    """A waiting ticket's place in its core's line (1: next), and the estimated wait."""

    number: int
    wait_s: float | None  # None: no reply ended on this core yet to estimate from


class Turns:
    """The visitors' limits and each core's slots and line (see the module's text)."""

    def __init__(
        self,
        path: Path | str,
        *,
        worker: int,
        core: int,
        max_replies: int,
        per_minute: int,
        slots: int,
        line: int,
    ) -> None:
        self._store = Store(path, worker)
        self.core, self.slots, self.line = core, slots, line
        self._max_replies = max_replies
        self._per_minute = per_minute
        self._freed = asyncio.Event()  # set when a slot of this worker's is given back
        self._handed: dict[str, Ticket] = {}  # message id -> its ticket, admission to reply

    def admit(self, user: str, *, now: float) -> Ticket:
        """Count a message of ``user`` that will get a reply: running, or waiting in line;
        ``LimitExceededError`` past the visitor's limits or a full line."""
        store = self._store
        with store.transaction():
            self._count_message(user, now)
            if store.total("SELECT COUNT(*) FROM tickets WHERE user = ?", user) >= (
                self._max_replies
            ):
                raise LimitExceededError("replies", self._max_replies, retry_after_s=None)
            waiting = store.total(WAITING, self.core)
            if waiting == 0 and store.total(RUNNING, self.core) < self.slots:
                row = store.run(INSERT, user, store.worker, self.core, now)
                return Ticket(row, now, started=now)
            if waiting >= self.line:
                raise LimitExceededError("busy", self.line, retry_after_s=None)
            row = store.run(INSERT, user, store.worker, self.core, None)
        metrics.WAITING.inc()
        return Ticket(row, now)

    def _count_message(self, user: str, now: float) -> None:
        """The per-minute window: a refused message is a message too."""
        store = self._store
        store.run("DELETE FROM sent WHERE at <= ?", now - WINDOW_S)
        count, oldest = store.row("SELECT COUNT(*), MIN(at) FROM sent WHERE user = ?", user)
        if count >= self._per_minute:
            wait = oldest + WINDOW_S - now
            raise LimitExceededError("per_minute", self._per_minute, retry_after_s=wait)
        store.run("INSERT INTO sent (user, at) VALUES (?, ?)", user, now)

    def place(self, ticket: Ticket, *, now: float) -> Place | None:
        """The ticket's place in line; None once it runs (it takes a free slot here when
        its turn came)."""
        if ticket.started is not None:
            return None
        store = self._store
        ahead, free = self._ahead_and_free(ticket)
        if ahead <= free:  # looks like its turn: checked again in one transaction
            with store.transaction():
                ahead, free = self._ahead_and_free(ticket)
                if ahead <= free:
                    store.run("UPDATE tickets SET started = ? WHERE id = ?", now, ticket.id)
                    ticket.started = now
                    metrics.WAITING.dec()
                    return None
        number = max(1, ahead - max(0, free))
        mean = store.row("SELECT AVG(s) FROM held WHERE core = ?", self.core)[0]
        return Place(number, None if mean is None else number * mean / self.slots)

    def _ahead_and_free(self, ticket: Ticket) -> tuple[int, int]:
        """Waiting tickets up to ``ticket`` in the line's order, and the slots free now."""
        ahead = self._store.total(AHEAD, ticket.id, self.core)
        return ahead, self.slots - self._store.total(RUNNING, self.core)

    async def wait_turn(self, ticket: Ticket, show: Callable[[Place], Awaitable[None]]) -> None:
        """Until the ticket runs, ``show`` each new place (cancelled: ``done`` still must
        be called, as for any ticket)."""
        shown: Place | None = None
        try:
            while (place := self.place(ticket, now=time.monotonic())) is not None:
                if place != shown:
                    await show(place)
                    shown = place
                freed = self._freed
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(freed.wait(), LOOK_S)
        finally:
            if ticket.started is not None and ticket.started > ticket.joined:
                metrics.LINE_WAIT.observe(ticket.started - ticket.joined)

    def done(self, ticket: Ticket) -> None:
        """The ticket's reply ended (finished, stopped, failed) or it left the line."""
        with self._store.transaction():
            self._store.run("DELETE FROM tickets WHERE id = ?", ticket.id)
            if ticket.started is not None:
                held = time.monotonic() - ticket.started
                self._store.run("INSERT INTO held VALUES (?, ?)", self.core, held)
                self._store.run(
                    "DELETE FROM held WHERE core = ? AND rowid NOT IN "
                    "(SELECT rowid FROM held WHERE core = ? ORDER BY rowid DESC LIMIT ?)",
                    self.core,
                    self.core,
                    HELD_KEPT,
                )
        if ticket.started is None:
            metrics.WAITING.dec()
        self._handed = {key: t for key, t in self._handed.items() if t is not ticket}
        self._freed.set()  # this worker's waiters look at once
        self._freed = asyncio.Event()

    def hand_over(self, message_id: str, ticket: Ticket) -> None:
        """The front door admitted ``message_id``: its handler takes the ticket."""
        self._handed[message_id] = ticket

    def take(self, message_id: str) -> Ticket | None:
        return self._handed.pop(message_id, None)
