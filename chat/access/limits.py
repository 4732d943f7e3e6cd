"""Limits: the sign-in tries and sign-outs of
one process (a group's are ``chat.access.shared_limits``; replies at once and messages a
minute are ``chat.access.turns``).

Pure bookkeeping (no I/O, the clock is passed in), so it can be tested on its own.
"""

from __future__ import annotations

from collections import deque

__all__ = ["WINDOW_S", "SignInAttempts", "SignOuts"]

WINDOW_S = 60.0


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
