"""Per-user limits: replies at once, and messages per minute.

Pure bookkeeping (no I/O, the clock is passed in), so it can be tested on its own.

Usage::

    limits = UserLimits(max_replies=2, per_minute=20)
    limits.admit("alice", now=time.monotonic())   # LimitExceededError if over a limit
    try: ... finally: limits.done("alice")
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Literal

__all__ = ["LimitExceededError", "UserLimits"]

WINDOW_S = 60.0


class LimitExceededError(Exception):
    """The user is over a per-user limit; ``retry_after_s`` when waiting helps."""

    def __init__(
        self, limit: Literal["replies", "per_minute"], value: int, *, retry_after_s: float | None
    ) -> None:
        self.limit = limit
        self.value = value
        self.retry_after_s = retry_after_s
        super().__init__(f"over the limit {limit}={value}")


class UserLimits:
    def __init__(self, *, max_replies: int, per_minute: int) -> None:
        self._max_replies = max_replies
        self._per_minute = per_minute
        self._replying: defaultdict[str, int] = defaultdict(int)
        self._sent: defaultdict[str, deque[float]] = defaultdict(deque)

    def admit(self, user: str, *, now: float) -> None:
        """Count a message of ``user`` that will get a reply; refuse it if over a limit."""
        sent = self._sent[user]
        while sent and sent[0] <= now - WINDOW_S:
            sent.popleft()
        if len(sent) >= self._per_minute:
            wait = sent[0] + WINDOW_S - now
            raise LimitExceededError("per_minute", self._per_minute, retry_after_s=wait)
        if self._replying[user] >= self._max_replies:
            raise LimitExceededError("replies", self._max_replies, retry_after_s=None)
        sent.append(now)
        self._replying[user] += 1

    def done(self, user: str) -> None:
        """A reply admitted for ``user`` has ended (finished, stopped or failed)."""
        self._replying[user] -= 1
        if self._replying[user] <= 0:
            del self._replying[user]
