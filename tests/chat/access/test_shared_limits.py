"""The group's limits: two workers' views of one SQLite file count as one."""

from __future__ import annotations

from pathlib import Path

import pytest

from chat.access.shared_limits import SharedChatCount, forget
from chat.access.turns import ReplyLine
from chat.errors import LimitExceededError


def two_workers(path: Path, **limits: int) -> tuple[ReplyLine, ReplyLine]:
    """Two workers of one engine core, counting in one file."""
    values = {"line": 0} | limits
    return ReplyLine(path, worker=0, core=0, **values), ReplyLine(path, worker=1, core=0, **values)


def test_a_user_replying_on_one_worker_is_refused_on_the_other(tmp_path: Path) -> None:
    one, other = two_workers(tmp_path / "limits.db", max_replies=2, per_minute=10, slots=9)
    first = one.admit("alice", now=0.0)
    other.admit("alice", now=1.0)
    with pytest.raises(LimitExceededError) as refused:
        one.admit("alice", now=2.0)
    assert refused.value.limit == "replies"
    other.admit("bob", now=2.0)  # another user is not affected
    one.done(first)
    other.admit("alice", now=3.0)  # a place came back, wherever it was freed


def test_messages_a_minute_and_the_total_count_over_the_group(tmp_path: Path) -> None:
    one, other = two_workers(tmp_path / "limits.db", max_replies=9, per_minute=3, slots=3)
    running = [(one, one.admit("alice", now=0.0)), (other, other.admit("bob", now=0.0))]
    running.append((one, one.admit("carol", now=0.0)))
    with pytest.raises(LimitExceededError) as busy:
        other.admit("dave", now=1.0)  # the core's three slots are taken, and no line
    assert busy.value.limit == "busy"
    for worker, ticket in running:
        worker.done(ticket)  # a reply ends on the worker that runs it
    for at in (2.0, 2.5):  # alice's second and third message this minute
        one.done(one.admit("alice", now=at))
    with pytest.raises(LimitExceededError) as fast:
        other.admit("alice", now=3.0)  # the fourth, on the other worker
    assert fast.value.limit == "per_minute" and fast.value.retry_after_s == pytest.approx(57.0)
    other.admit("alice", now=61.0)  # the window moved on


def test_chats_per_address_count_over_the_group(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    one, other = SharedChatCount(path, worker=0), SharedChatCount(path, worker=1)
    assert one.open("10.0.0.1", most=2) and other.open("10.0.0.1", most=2)
    assert not one.open("10.0.0.1", most=2)
    assert other.open("10.0.0.2", most=2)
    one.close("10.0.0.1")
    assert other.open("10.0.0.1", most=2)


def test_a_restarted_workers_counts_are_forgotten_and_the_others_kept(tmp_path: Path) -> None:
    path = tmp_path / "limits.db"
    one, other = two_workers(path, max_replies=2, per_minute=10, slots=9)
    one.admit("alice", now=0.0)
    other.admit("alice", now=0.0)
    chats = SharedChatCount(path, worker=1)
    assert chats.open("10.0.0.1", most=1)
    forget(path, workers=[1])  # worker 1 died with a reply running and a chat open
    assert chats.open("10.0.0.1", most=1)
    other.admit("alice", now=1.0)  # worker 1's reply no longer counts, worker 0's does
    with pytest.raises(LimitExceededError):
        one.admit("alice", now=2.0)
