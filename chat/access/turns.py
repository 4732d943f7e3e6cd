"""Replies at once and the line for them: a visitor's limits, each engine core's slots, and
a fair, bounded line of the messages that wait for one.

One implementation for one process, a group of workers and replicas on several machines:
the counts live in the app's one store (``chat.counts``: SQLite in memory, the group's
file, or PostgreSQL), one short transaction per change. A message is counted against its
visitor (messages a minute, replies at once: a message waiting in line is one of them),
then it gets a *ticket*:
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

A look ranks the whole line once (one query, sorted by SQLite) and every waiter of the
worker reads its place from it for ``LOOK_S / 2``, or until the worker changes the line:
its cost grows with the line, not its square (each waiter ran the ranking itself before,
12.7 CPU cores for 2,000 waiting). A waiting message whose chat went away is told to
leave (``leave``): its wait ends with ``LeftLineError`` and its place is given back.

Usage::

    turns = ReplyLine(store, core=0, max_replies=2, per_minute=20, slots=8, line=8)
    ticket = await turns.admit("address:10.0.0.7")  # LimitExceededError
    await turns.wait_turn(ticket, show, chat=session_id)   # show(Place) while it waits
    turns.leave(session_id)               # its tab went away: LeftLineError in the wait
    await turns.done(ticket)              # however it ended: its slot or its place back
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .. import metrics
from ..counts import Store, Tx
from ..errors import LimitExceededError
from .limits import WINDOW_S
from .quota import DailyTokens

__all__ = ["LOOK_S", "LeftLineError", "Place", "ReplyLine", "Ticket"]

LOOK_S = 0.25  # how often a waiting ticket looks at the line (a local release wakes it)
HELD_KEPT = 50  # recent replies per core the wait is estimated from

INSERT = (
    "INSERT INTO counts_tickets (visitor, owner, core, started) VALUES (?, ?, ?, ?) RETURNING id"
)
WAITING = "SELECT COUNT(*) FROM counts_tickets WHERE core = ? AND started IS NULL"
RUNNING = "SELECT COUNT(*) FROM counts_tickets WHERE core = ? AND started IS NOT NULL"
# The core's tickets with their round (the visitor's tickets before each on the core),
# waiting ones in the line's order: (round, arrival).
RANKING = (
    "SELECT id, started IS NULL FROM (SELECT id, started, ROW_NUMBER() OVER (PARTITION BY "
    "visitor ORDER BY id) AS round FROM counts_tickets WHERE core = ?) AS ranked "
    "ORDER BY round, id"
)


class LeftLineError(Exception):
    """A waiting message left the line: its chat went away (``ReplyLine.leave``)."""


@dataclass(frozen=True)
class _Look:
    """One ranking of a core's line: each waiting ticket's rank (1: first), the replies
    running, the mean time a slot was held (None: none ended yet), and when."""

    ranks: dict[int, int]
    running: int
    mean_held_s: float | None
    at: float


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


class ReplyLine:
    """The visitors' limits and each core's slots and line (see the module's text)."""

    def __init__(
        self,
        store: Store,
        *,
        core: int,
        max_replies: int,
        per_minute: int,
        slots: int,
        line: int,
        quota: DailyTokens | None = None,
    ) -> None:
        self._store = store
        self.quota = quota  # the visitors' tokens a day, checked with their other limits
        self.clock = store.clock
        self.core, self.slots, self.line = core, slots, line
        self._max_replies = max_replies
        self._per_minute = per_minute
        self._freed = asyncio.Event()  # set at each look: every LOOK_S, or a slot freed here
        self._ticker: asyncio.Task[None] | None = None  # sets it every LOOK_S while any wait
        self._handed: dict[str, Ticket] = {}  # message id -> its ticket, admission to reply
        self._look: _Look | None = None  # the last ranking, shared by this worker's waiters
        self._chats: dict[int, str] = {}  # waiting ticket -> its chat (``leave``)
        self._left: set[int] = set()  # waiting tickets told to leave
        self._releasing: set[asyncio.Task[None]] = set()  # ``release``'s, kept till done

    async def admit(self, user: str, *, now: float | None = None) -> Ticket:
        """Count a message of ``user`` that will get a reply: running, or waiting in line;
        ``LimitExceededError`` past the visitor's limits or a full line."""
        now = self.clock() if now is None else now
        owner = self._store.owner
        async with self._store.transaction() as tx:
            await self._count_message(tx, user, now)
            if self.quota is not None:
                await self.quota.check(tx, user)
            mine = await tx.total("SELECT COUNT(*) FROM counts_tickets WHERE visitor = ?", user)
            if mine >= self._max_replies:
                raise LimitExceededError("replies", self._max_replies, retry_after_s=None)
            waiting = await tx.total(WAITING, self.core)
            if waiting == 0 and await tx.total(RUNNING, self.core) < self.slots:
                row = await tx.total(INSERT, user, owner, self.core, now)
                return Ticket(row, now, started=now)
            if waiting >= self.line:
                raise LimitExceededError("busy", self.line, retry_after_s=None)
            row = await tx.total(INSERT, user, owner, self.core, None)
        metrics.WAITING.inc()
        self._look = None
        return Ticket(row, now)

    async def _count_message(self, tx: Tx, user: str, now: float) -> None:
        """The per-minute window: a refused message is a message too."""
        await tx.run("DELETE FROM counts_sent WHERE at <= ?", now - WINDOW_S)
        sent = "SELECT COUNT(*), MIN(at) FROM counts_sent WHERE visitor = ?"
        count, oldest = await tx.row(sent, user) or (0, None)
        if count >= self._per_minute:
            wait = oldest + WINDOW_S - now
            raise LimitExceededError("per_minute", self._per_minute, retry_after_s=wait)
        await tx.run("INSERT INTO counts_sent (visitor, at) VALUES (?, ?)", user, now)

    async def place(self, ticket: Ticket, *, now: float | None = None) -> Place | None:
        """The ticket's place in line; None once it runs (it takes a free slot here when
        its turn came)."""
        if ticket.started is not None:
            return None
        now = self.clock() if now is None else now
        look = self._look
        if look is None or now - look.at >= LOOK_S / 2 or ticket.id not in look.ranks:
            async with self._store.reading() as tx:
                look = await self._looked(tx, now)
        ahead, free = self._ahead_and_free(look, ticket)
        if ahead <= free:  # looks like its turn: checked again in one transaction
            async with self._store.transaction() as tx:
                look = await self._looked(tx, now)
                ahead, free = self._ahead_and_free(look, ticket)
                if ahead <= free:
                    update = "UPDATE counts_tickets SET started = ? WHERE id = ?"
                    await tx.run(update, now, ticket.id)
                    ticket.started = now
            if ticket.started is not None:
                self._look = None
                metrics.WAITING.dec()
                return None
        number = max(1, ahead - max(0, free))
        mean = look.mean_held_s
        return Place(number, None if mean is None else number * mean / self.slots)

    def _ahead_and_free(self, look: _Look, ticket: Ticket) -> tuple[int, int]:
        """Waiting tickets up to ``ticket`` in the line's order (past the end if it is not
        in line), and the slots free, as ``look`` saw them."""
        return look.ranks.get(ticket.id, len(look.ranks) + 1), self.slots - look.running

    async def _looked(self, tx: Tx, now: float) -> _Look:
        """The core's line ranked now, kept for this worker's waiters for ``LOOK_S / 2``."""
        rows = await tx.rows(RANKING, self.core)
        waiting = [ticket for ticket, is_waiting in rows if is_waiting]
        mean = await tx.row("SELECT AVG(s) FROM counts_held WHERE core = ?", self.core)
        ranks = {ticket: rank for rank, ticket in enumerate(waiting, start=1)}
        held = None if mean is None or mean[0] is None else float(mean[0])
        look = self._look = _Look(ranks, len(rows) - len(waiting), held, now)
        return look

    async def wait_turn(
        self, ticket: Ticket, show: Callable[[Place], Awaitable[None]], *, chat: str = ""
    ) -> None:
        """Until the ticket runs, ``show`` each new place; ``LeftLineError`` once its
        ``chat`` is told to ``leave`` (cancelled or left: ``done`` still must be called,
        as for any ticket)."""
        shown: Place | None = None
        self._chats[ticket.id] = chat
        try:
            while (place := await self.place(ticket)) is not None:
                if ticket.id in self._left:
                    raise LeftLineError(chat)
                if place != shown:
                    await show(place)
                    shown = place
                await self._next_look()
        finally:
            self._chats.pop(ticket.id, None)
            self._left.discard(ticket.id)
            if ticket.started is not None and ticket.started > ticket.joined:
                metrics.LINE_WAIT.observe(ticket.started - ticket.joined)

    def leave(self, chat: str) -> int:
        """The chat's waiting messages leave the line (its tab went away); how many."""
        gone = {ticket for ticket, of in self._chats.items() if of == chat}
        self._left |= gone
        if gone:
            self._wake()
        return len(gone)

    async def _next_look(self) -> None:
        """Until this worker's waiters look again: ``LOOK_S`` on one timer they share (one
        each cost more than the look), or at once when a slot is freed here."""
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.create_task(self._tick())
        await self._freed.wait()

    async def _tick(self) -> None:
        while self._chats:
            await asyncio.sleep(LOOK_S)
            self._wake()

    def _wake(self) -> None:
        """This worker's waiters look at once."""
        self._freed.set()
        self._freed = asyncio.Event()

    async def done(self, ticket: Ticket) -> None:
        """The ticket's reply ended (finished, stopped, failed) or it left the line."""
        async with self._store.transaction() as tx:
            await tx.run("DELETE FROM counts_tickets WHERE id = ?", ticket.id)
            if ticket.started is not None:
                held = self.clock() - ticket.started
                await tx.run("INSERT INTO counts_held (core, s) VALUES (?, ?)", self.core, held)
                await tx.run(
                    "DELETE FROM counts_held WHERE core = ? AND id NOT IN "
                    "(SELECT id FROM counts_held WHERE core = ? ORDER BY id DESC LIMIT ?)",
                    self.core,
                    self.core,
                    HELD_KEPT,
                )
        if ticket.started is None:
            metrics.WAITING.dec()
        self._handed = {key: t for key, t in self._handed.items() if t is not ticket}
        self._look = None
        self._wake()

    def release(self, ticket: Ticket) -> None:
        """``done``, from a callback (a reply's task ended): soon, on the loop."""
        task = asyncio.ensure_future(self.done(ticket))
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    def hand_over(self, message_id: str, ticket: Ticket) -> None:
        """The front door admitted ``message_id``: its handler takes the ticket."""
        self._handed[message_id] = ticket

    def take(self, message_id: str) -> Ticket | None:
        return self._handed.pop(message_id, None)
