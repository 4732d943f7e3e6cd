"""How often one visitor may knock: a token bucket per key, the clock passed in.

Each key (a visitor: ``user:NAME`` or ``address:IP``) may spend ``per_minute`` a minute on
average and up to ``burst`` at once; a full bucket is the same as no record, so idle
keys are dropped and what is kept stays bounded, whatever the number of addresses.

Usage::

    rate = Rate(per_minute=600)
    rate.allow("address:127.0.0.2", now=time.monotonic())   # False: over the rate
"""

from __future__ import annotations

__all__ = ["Rate"]

PRUNE_EVERY = 1024  # checks between two sweeps of the idle keys


class Rate:
    """``per_minute`` on average, ``burst`` at once (default: a third of a minute's)."""

    def __init__(self, *, per_minute: int, burst: int | None = None) -> None:
        self.per_minute = per_minute
        self._per_s = per_minute / 60.0
        self._burst = float(burst if burst is not None else max(1, per_minute // 3))
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, when)
        self._checks = 0

    def _tokens(self, key: str, now: float) -> float:
        tokens, when = self._buckets.get(key, (self._burst, now))
        return min(self._burst, tokens + (now - when) * self._per_s)

    def allow(self, key: str, *, now: float) -> bool:
        """Spend one for ``key``; False (nothing spent) when its bucket is empty."""
        self._checks += 1
        if self._checks % PRUNE_EVERY == 0:
            self._prune(now)
        tokens = self._tokens(key, now)
        if tokens < 1.0:
            self._buckets[key] = (tokens, now)
            return False
        self._buckets[key] = (tokens - 1.0, now)
        return True

    def retry_after_s(self, key: str, *, now: float) -> float:
        """How long until ``key`` may knock again (0: now)."""
        return max(0.0, (1.0 - self._tokens(key, now)) / self._per_s)

    def _prune(self, now: float) -> None:
        full = [key for key in self._buckets if self._tokens(key, now) >= self._burst]
        for key in full:
            del self._buckets[key]

    def __len__(self) -> int:
        return len(self._buckets)
