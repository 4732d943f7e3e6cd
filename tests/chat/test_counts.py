"""The one store for every count (``chat.counts``), on each backend: a lone process's
memory, a box's SQLite file shared by a group's workers, and PostgreSQL shared by
replicas on several machines. Two stores over one database are two processes (or two
machines): a visitor's limits, the line, chats per address, rates, sign-in tries and
sign-outs count once over both."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from chat.access.limits import SignInAttempts, SignOuts
from chat.access.quota import DailyTokens
from chat.access.rates import Rate
from chat.access.sessions import ChatCount
from chat.access.turns import ReplyLine
from chat.counts import Store, forget, keep_alive, open_store
from chat.errors import LimitExceededError
from testing.history import new_database
from testing.programs import needs

Opener = Callable[[str], Store]  # a process's store over the test's one database


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=needs("initdb", "postgresql"))])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """Stores over one new database, one for each process that asks."""
    if request.param == "sqlite":
        where = str(tmp_path / "limits.db")
    else:
        server = request.getfixturevalue("postgres_url")
        where = await new_database(server, f"counts_{uuid.uuid4().hex}")
    opened: list[Store] = []

    def open_one(owner: str) -> Store:
        opened.append(open_store(where, owner=owner))
        return opened[-1]

    yield open_one
    for store in opened:
        await store.close()


def two_workers(stores: Opener, **limits: int) -> tuple[ReplyLine, ReplyLine]:
    """Two workers of one engine core, counting in one database."""
    values = {"core": 0, "line": 0} | limits
    return ReplyLine(stores("w0"), **values), ReplyLine(stores("w1"), **values)


async def test_a_user_replying_on_one_worker_is_refused_on_the_other(stores: Opener) -> None:
    one, other = two_workers(stores, max_replies=2, per_minute=10, slots=9)
    first = await one.admit("alice", now=0.0)
    await other.admit("alice", now=1.0)
    with pytest.raises(LimitExceededError) as refused:
        await one.admit("alice", now=2.0)
    assert refused.value.limit == "replies"
    await other.admit("bob", now=2.0)  # another user is not affected
    await one.done(first)
    await other.admit("alice", now=3.0)  # a place came back, wherever it was freed


async def test_messages_a_minute_and_the_slots_count_over_both(stores: Opener) -> None:
    one, other = two_workers(stores, max_replies=9, per_minute=3, slots=3)
    running = [(one, await one.admit("alice", now=0.0)), (other, await other.admit("bob", now=0))]
    running.append((one, await one.admit("carol", now=0.0)))
    with pytest.raises(LimitExceededError) as busy:
        await other.admit("dave", now=1.0)  # the core's three slots are taken, and no line
    assert busy.value.limit == "busy"
    for worker, ticket in running:
        await worker.done(ticket)  # a reply ends on the worker that runs it
    for at in (2.0, 2.5):  # alice's second and third message this minute
        await one.done(await one.admit("alice", now=at))
    with pytest.raises(LimitExceededError) as fast:
        await other.admit("alice", now=3.0)  # the fourth, on the other worker
    assert fast.value.limit == "per_minute" and fast.value.retry_after_s == pytest.approx(57.0)
    await other.admit("alice", now=61.0)  # the window moved on


async def test_the_lines_order_is_one_over_both(stores: Opener) -> None:
    """Fair across visitors whichever process each message reached: alice's second waits
    behind bob's and carol's first; a slot freed on one is taken by the head on the other."""
    one, other = two_workers(stores, max_replies=9, per_minute=99, slots=1, line=9)
    running = await one.admit("someone", now=0)
    alice = [await one.admit("alice", now=0), await other.admit("alice", now=0)]
    bob, carol = await other.admit("bob", now=0), await one.admit("carol", now=0)
    order = [alice[0], bob, carol, alice[1]]
    seen = [await (one if t in (alice[0], carol) else other).place(t, now=0) for t in order]
    assert [place.number for place in seen if place is not None] == [1, 2, 3, 4]
    await one.done(running)
    assert await other.place(alice[0], now=1) is None  # the head's turn, seen from either
    assert [(await other.place(t, now=1)).number for t in (bob, carol)] == [1, 2]  # type: ignore[union-attr]


async def test_chats_per_address_count_over_both(stores: Opener) -> None:
    one, other = ChatCount(stores("w0")), ChatCount(stores("w1"))
    assert await one.open("10.0.0.1", most=2) and await other.open("10.0.0.1", most=2)
    assert not await one.open("10.0.0.1", most=2)
    assert await other.open("10.0.0.2", most=2)
    await one.close("10.0.0.1")
    assert await other.open("10.0.0.1", most=2)


async def test_a_rate_is_one_bucket_over_both(stores: Opener) -> None:
    one = Rate(stores("w0"), "events", per_minute=60, burst=3)
    other = Rate(stores("w1"), "events", per_minute=60, burst=3)
    allowed = [await (one, other)[n % 2].allow("address:10.0.0.9", now=0) for n in range(5)]
    assert allowed == [True, True, True, False, False]  # three at once, wherever they knock
    assert await other.retry_after_s("address:10.0.0.9", now=0) == pytest.approx(1.0)
    assert await one.allow("address:10.0.0.9", now=1.0)  # a second later: one more
    assert await one.allow("address:10.0.0.8", now=1.0)  # another visitor's own bucket


async def test_sign_in_tries_lock_over_both_and_are_counted_before_they_are_checked(
    stores: Opener,
) -> None:
    """A try counts as a failure from the moment it arrives: tries sent at once are all
    counted; over two processes the count is one."""
    first = SignInAttempts(stores("w0"), max_failures=3, window_s=100, slowest_s=4)
    other = SignInAttempts(stores("w1"), max_failures=3, window_s=100, slowest_s=4)
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        assert await first.begin("frank", address, now=0)
    assert await other.begin("frank", "10.0.0.4", now=1)  # frank is not locked out
    await other.succeeded("frank", "10.0.0.4")  # the right password: no failure
    assert await first.delay_s("frank", now=1) == 1.0  # but slowed
    started = [await (first, other)[i % 2].begin("frank", "10.0.0.5", now=2) for i in range(6)]
    assert started == [True, True, True, False, False, False]  # locked after three
    assert await other.delay_s("frank", now=3) == 2.0  # 6 failures: 1 s, then 2 s (at most 4)
    assert await first.delay_s("gina", now=3) == 0.0
    assert await first.begin("frank", "10.0.0.5", now=103)  # the window moved on


async def test_a_sign_out_on_one_ends_the_sign_in_on_the_other(stores: Opener) -> None:
    one, other = SignOuts(stores("w0")), SignOuts(stores("w1"))
    await one.sign_out("carol", 1000.0, until=5000.0, now=2000.0)
    assert await other.signed_out("carol", 1000.0)
    assert not await other.signed_out("carol", 1500.0)  # her next sign-in is another
    await other.sign_out("dave", 1.0, until=2.0, now=6000.0)  # carol's ended: dropped
    assert not await one.signed_out("carol", 1000.0)


async def test_a_restarted_process_forgets_what_it_held_and_a_silent_one_is_dropped(
    stores: Opener,
) -> None:
    one, other = two_workers(stores, max_replies=2, per_minute=10, slots=9)
    await one.admit("alice", now=0.0)
    await other.admit("alice", now=0.0)
    chats_store = stores("w1")
    chats = ChatCount(chats_store)
    assert await chats.open("10.0.0.1", most=1)
    await forget(chats_store, ["w1"])  # w1 died with a reply running and a chat open
    assert await chats.open("10.0.0.1", most=1)
    await other.admit("alice", now=1.0)  # w1's old reply no longer counts, w0's does
    with pytest.raises(LimitExceededError):
        await one.admit("alice", now=2.0)
    silent, alive = stores("w0"), stores("w2")
    # w0's lease is taken once and never renewed; w2's sweep, three leases on, drops it
    await _one_lease(silent, every_s=1000.0)
    await _one_lease(alive, every_s=0.0001)
    await other.admit("alice", now=3.0)  # w0's reply no longer counts


async def _one_lease(store: Store, every_s: float) -> None:
    """One round of ``keep_alive``: the lease taken (and the silent dropped), then stopped."""
    import asyncio

    task = asyncio.create_task(keep_alive(store, every_s=every_s))
    await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_visitors_tokens_a_day_count_over_both(stores: Opener) -> None:
    one, other = DailyTokens(stores("w0"), per_day=1000), DailyTokens(stores("w1"), per_day=1000)
    assert await one.spend("user:kim", 700) == pytest.approx(0.3)
    assert await other.spend("user:kim", 200) == pytest.approx(0.1)  # the same day's
    line = ReplyLine(stores("w2"), core=0, max_replies=9, per_minute=99, slots=9, line=0)
    line.quota = one
    await line.admit("user:kim", now=0.0)  # 100 left: a message may still go
    await other.spend("user:kim", 150)
    with pytest.raises(LimitExceededError) as spent:
        await line.admit("user:kim", now=1.0)
    assert spent.value.limit == "daily_tokens" and 0 < (spent.value.retry_after_s or 0) <= 86400
    await line.admit("user:lee", now=1.0)  # another visitor's day is theirs
