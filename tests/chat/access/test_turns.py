"""The replies at once and their line (``chat.access.turns``), on its own: a visitor's
limits, each core's slots, a fair and bounded line, places and waits, over one process
and over two workers sharing one file (the same over PostgreSQL: ``tests/chat/test_counts.py``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from chat.access.limits import WINDOW_S
from chat.access.turns import LOOK_S, LeftLineError, Place, ReplyLine, Ticket
from chat.counts import open_store
from chat.counts.sqlite import _SqliteTx
from chat.errors import LimitExceededError


def turns(path: Path | str = ":memory:", worker: int = 0, **values: int) -> ReplyLine:
    limits = {"core": 0, "max_replies": 9, "per_minute": 99, "slots": 1, "line": 9}
    return ReplyLine(open_store(path, owner=f"worker {worker}"), **(limits | values))


async def places(line: ReplyLine, tickets: list[Ticket], now: float = 0.0) -> list[int | None]:
    found = [await line.place(ticket, now=now) for ticket in tickets]
    return [None if place is None else place.number for place in found]


async def test_a_visitor_counts_replies_at_once_and_messages_a_minute() -> None:
    line = turns(max_replies=2, per_minute=3, slots=9)
    first = await line.admit("alice", now=0)
    await line.admit("alice", now=1)
    with pytest.raises(LimitExceededError) as many:
        await line.admit("alice", now=2)  # refused, and still counted: a message is a message
    assert many.value.limit == "replies" and many.value.retry_after_s is None
    await line.admit("bob", now=2)  # one user's limits are not another's
    await line.done(first)
    with pytest.raises(LimitExceededError) as fast:
        await line.admit("alice", now=3)  # room for a reply, but three messages this minute
    assert fast.value.limit == "per_minute" and fast.value.retry_after_s == WINDOW_S - 3
    await line.admit("alice", now=WINDOW_S + 2.5)  # the first three left the window


async def test_past_the_slots_a_message_waits_and_past_the_line_it_is_refused() -> None:
    line = turns(slots=2, line=2)
    running = [await line.admit(user, now=0) for user in ("alice", "bob")]
    assert all(ticket.started is not None for ticket in running)
    waiting = [await line.admit(user, now=0) for user in ("carol", "dave")]
    assert await places(line, waiting) == [1, 2]
    with pytest.raises(LimitExceededError) as full:
        await line.admit("erin", now=0)
    assert full.value.limit == "busy"
    await line.done(running[0])
    assert await places(line, waiting) == [None, 1]  # carol's turn came; dave is next
    await line.done(waiting[0])
    assert await places(line, waiting[1:]) == [None]


async def test_a_waiting_message_is_one_of_its_visitors_and_leaving_frees_its_place() -> None:
    line = turns(max_replies=2, slots=1)
    await line.admit("alice", now=0)
    bob = [await line.admit("bob", now=0), await line.admit("bob", now=0)]
    with pytest.raises(LimitExceededError) as many:
        await line.admit("bob", now=0)
    assert many.value.limit == "replies"
    await line.done(bob[0])  # stopped while waiting
    assert await places(line, bob[1:]) == [1]
    await line.admit("bob", now=0)


async def test_the_line_is_fair_across_visitors_and_in_order_within_one() -> None:
    """Alice's five tabs queue behind each other's first, not before Bob and Carol."""
    line = turns(slots=1, line=20)
    await line.admit("someone", now=0)
    alice = [await line.admit("alice", now=0) for _ in range(5)]
    bob, carol = await line.admit("bob", now=0), await line.admit("carol", now=0)
    assert await places(line, [alice[0], bob, carol, *alice[1:]]) == [1, 2, 3, 4, 5, 6, 7]


async def test_the_wait_is_estimated_from_the_cores_recent_replies() -> None:
    line = turns(slots=2)
    first = [await line.admit("a", now=0), await line.admit("b", now=0)]
    waiting = await line.admit("c", now=0)
    await line.admit("d", now=0)
    assert await line.place(waiting, now=0) == Place(1, None)  # no reply ended: no estimate
    first[0].started = time.monotonic() - 4.0  # a reply that held its slot for 4 s
    await line.done(first[0])
    assert await line.place(waiting, now=0) is None  # its turn
    later = await line.admit("e", now=0)
    place = await line.place(later, now=0)
    assert place is not None and place.number == 2  # d, then e; two slots of 4 s each
    assert place.wait_s == pytest.approx(4.0, abs=0.1)


async def test_each_engine_core_has_its_own_slots_and_line(tmp_path: Path) -> None:
    path = tmp_path / "limits.db"
    core0, core1 = turns(path, core=0, worker=0), turns(path, core=1, worker=2)
    assert (await core0.admit("alice", now=0)).started is not None
    assert (await core1.admit("bob", now=0)).started is not None  # core 0's slot is not core 1's
    waiting = await core0.admit("carol", now=0)
    assert await places(core0, [waiting]) == [1]


async def test_two_workers_of_a_core_share_its_slots_and_line(tmp_path: Path) -> None:
    path = tmp_path / "limits.db"
    one, other = turns(path, worker=0), turns(path, worker=1)
    running = await one.admit("alice", now=0)
    first, second = await other.admit("bob", now=0), await one.admit("carol", now=0)
    assert await places(one, [second]) == [2] and await places(other, [first]) == [1]
    await one.done(running)  # freed on one worker, taken by the head of the line on the other
    assert await places(one, [second]) == [1]
    assert await places(other, [first], now=LOOK_S) == [None]  # at its next look


async def test_a_waiting_message_is_woken_when_a_slot_is_freed_and_sees_its_places() -> None:
    line = turns(slots=1)
    running = await line.admit("alice", now=0)
    ahead, waiting = await line.admit("bob", now=0), await line.admit("carol", now=0)
    seen: list[int] = []

    async def show(place: Place) -> None:
        seen.append(place.number)

    waiter = asyncio.create_task(line.wait_turn(waiting, show))
    await asyncio.sleep(0.05)
    await line.done(running)
    await asyncio.sleep(0.05)
    assert await line.place(ahead, now=0) is None  # bob took the slot alice gave back
    await line.done(ahead)
    await asyncio.wait_for(waiter, 1)
    assert seen == [2, 1] and waiting.started is not None


async def test_a_chat_that_went_away_takes_its_waiting_message_out_of_the_line() -> None:
    line = turns(slots=1)
    running = await line.admit("alice", now=0)
    gone, kept = await line.admit("bob", now=0), await line.admit("carol", now=0)

    async def show(place: Place) -> None:
        return None

    leaving = asyncio.create_task(line.wait_turn(gone, show, chat="bob's tab"))
    staying = asyncio.create_task(line.wait_turn(kept, show, chat="carol's tab"))
    await asyncio.sleep(0.05)
    assert line.leave("bob's tab") == 1
    with pytest.raises(LeftLineError):
        await asyncio.wait_for(leaving, 1)
    await line.done(gone)  # as the message's task does, however it ended
    assert await places(line, [kept]) == [1]  # carol is next now
    await line.done(running)
    await asyncio.wait_for(staying, 1)
    assert kept.started is not None


async def test_a_workers_waiting_messages_share_one_ranking_a_look(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each waiting message ranked the whole line itself at every look (quadratic: 12.7
    CPU cores for 2,000 waiting); the cost is counted in queries, not timed."""
    rankings = 0
    ranked = _SqliteTx.rows

    async def counted(tx: _SqliteTx, sql: str, *args: object) -> list[tuple[object, ...]]:
        nonlocal rankings
        rankings += 1
        return await ranked(tx, sql, *args)

    monkeypatch.setattr(_SqliteTx, "rows", counted)
    line = turns(slots=1, line=500)
    await line.admit("holder", now=0)
    waiting = [await line.admit(f"visitor {n % 50}", now=0) for n in range(200)]

    async def show(place: Place) -> None:
        return None

    waiters = [asyncio.create_task(line.wait_turn(t, show, chat=str(t.id))) for t in waiting]
    await asyncio.sleep(3 * LOOK_S + 0.05)  # four looks
    for waiter in waiters:
        waiter.cancel()
    await asyncio.gather(*waiters, return_exceptions=True)
    assert 1 <= rankings <= 20, rankings  # about one a look (200 a look before)
