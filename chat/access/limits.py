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

__all__ = ["LimitExceededError", "SignInAttempts", "SignOuts", "UserLimits"]

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
    """Failed sign-ins in a sliding window, so guessing is slow and no stranger can lock a
    user out: a name guessed from one address, or many names from one address, is refused
    there after ``max_failures`` in the window; a name that failed that often from
    anywhere is only slowed (``delay_s``), its right password still signs in."""

    def __init__(
        self, *, max_failures: int = 10, window_s: float = 300.0, slowest_s: float = 8.0
    ) -> None:
        self._max_failures = max_failures
        self._window_s = window_s
        self._slowest_s = slowest_s
        self._failed: dict[str, deque[float]] = {}

    @staticmethod
    def keys(name: str, address: str) -> tuple[str, str, str]:
        """What a try counts for: this name from this address, this address, this name."""
        return f"pair:{address}\0{name}", f"address:{address}", f"name:{name}"

    @staticmethod
    def delay_for(failures: int, max_failures: int, slowest_s: float) -> float:
        """0, then 1 s, doubling with each further ``max_failures`` failures, up to
        ``slowest_s``."""
        if failures < max_failures:
            return 0.0
        return float(min(slowest_s, 2 ** (failures // max_failures - 1)))

    def _count(self, key: str, now: float) -> int:
        for old in list(self._failed):  # what left the window, for every key
            times = self._failed[old]
            while times and times[0] <= now - self._window_s:
                times.popleft()
            if not times:
                del self._failed[old]
        return len(self._failed.get(key, ()))

    def blocked(self, name: str, address: str, *, now: float) -> bool:
        """Too many failures for this name from this address, or from this address."""
        pair, by_address, _ = self.keys(name, address)
        return max(self._count(pair, now), self._count(by_address, now)) >= self._max_failures

    def delay_s(self, name: str, *, now: float) -> float:
        """How long a try for ``name`` waits: 0, then 1 s, doubling with each further
        ``max_failures`` failures from anywhere, up to ``slowest_s``."""
        failures = self._count(self.keys(name, "")[2], now)
        return self.delay_for(failures, self._max_failures, self._slowest_s)

    def begin(self, name: str, address: str, *, now: float) -> bool:
        """Count a try before it is checked (a failure until ``succeeded`` says otherwise:
        tries sent at once are all counted); False, not counted, where it is locked."""
        if self.blocked(name, address, now=now):
            return False
        for key in self.keys(name, address):
            self._failed.setdefault(key, deque()).append(now)
        return True

    def succeeded(self, name: str, address: str) -> None:
        """The try ``begin`` counted was right: it is no failure."""
        for key in self.keys(name, address):
            times = self._failed.get(key)
            if times:
                times.pop()


class SignOuts:
    """Sign-ins their user signed out of (``POST /logout``), each kept until its tokens
    would have ended anyway: a token copied before the sign-out no longer works."""

    def __init__(self) -> None:
        self._until: dict[tuple[str, float], float] = {}  # (user, signed in at) -> end

    def sign_out(self, user: str, signed_in_at: float, *, until: float, now: float) -> None:
        self._until = {key: end for key, end in self._until.items() if end > now}
        self._until[(user, signed_in_at)] = until

    def signed_out(self, user: str, signed_in_at: float) -> bool:
        return (user, signed_in_at) in self._until
