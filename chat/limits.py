"""Limits: replies at once per user and over all users, messages per user and minute.

Pure bookkeeping (no I/O, the clock is passed in), so it can be tested on its own.

Usage::

    limits = UserLimits(max_replies=2, per_minute=20, max_total=512)
    limits.admit("alice", now=time.monotonic())   # LimitExceededError if over a limit
    try: ... finally: limits.done("alice")
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Literal

__all__ = ["LimitExceededError", "SignInAttempts", "UserLimits"]

WINDOW_S = 60.0


class LimitExceededError(Exception):
    """The user is over a per-user limit; ``retry_after_s`` when waiting helps."""

    def __init__(
        self,
        limit: Literal["replies", "per_minute", "busy"],
        value: int,
        *,
        retry_after_s: float | None,
    ) -> None:
        self.limit = limit
        self.value = value
        self.retry_after_s = retry_after_s
        super().__init__(f"over the limit {limit}={value}")


class UserLimits:
    def __init__(self, *, max_replies: int, per_minute: int, max_total: int) -> None:
        self._max_replies = max_replies
        self._per_minute = per_minute
        self._max_total = max_total  # replies at once over all users
        self._replying: defaultdict[str, int] = defaultdict(int)
        self._sent: defaultdict[str, deque[float]] = defaultdict(deque)

    def admit(self, user: str, *, now: float) -> None:
        """Count a message of ``user`` that will get a reply; refuse it if over a limit."""
        self._forget_idle(now)
        sent = self._sent[user]
        while sent and sent[0] <= now - WINDOW_S:
            sent.popleft()
        if len(sent) >= self._per_minute:
            wait = sent[0] + WINDOW_S - now
            raise LimitExceededError("per_minute", self._per_minute, retry_after_s=wait)
        sent.append(now)  # counted even if refused below: a refusal is a message too
        if self._replying[user] >= self._max_replies:
            raise LimitExceededError("replies", self._max_replies, retry_after_s=None)
        if sum(self._replying.values()) >= self._max_total:
            raise LimitExceededError("busy", self._max_total, retry_after_s=None)
        self._replying[user] += 1

    def _forget_idle(self, now: float) -> None:
        """Drop the users with no message in the window (what is kept stays bounded)."""
        idle = [u for u, sent in self._sent.items() if not sent or sent[-1] <= now - WINDOW_S]
        for user in idle:
            if user not in self._replying:
                del self._sent[user]

    def done(self, user: str) -> None:
        """A reply admitted for ``user`` has ended (finished, stopped or failed)."""
        self._replying[user] -= 1
        if self._replying[user] <= 0:
            del self._replying[user]


class SignInAttempts:
    """Failed sign-ins per key (a name, an address) in a sliding window; a key with
    ``max_failures`` in the window is refused until the oldest leaves it."""

    def __init__(self, *, max_failures: int = 10, window_s: float = 300.0) -> None:
        self._max_failures = max_failures
        self._window_s = window_s
        self._failed: dict[str, deque[float]] = {}

    def blocked(self, keys: list[str], *, now: float) -> bool:
        for key in list(self._failed):
            times = self._failed[key]
            while times and times[0] <= now - self._window_s:
                times.popleft()
            if not times:
                del self._failed[key]
        return any(len(self._failed.get(key, ())) >= self._max_failures for key in keys)

    def failed(self, keys: list[str], *, now: float) -> None:
        for key in keys:
            self._failed.setdefault(key, deque()).append(now)
