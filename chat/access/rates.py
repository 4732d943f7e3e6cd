"""How often one visitor may knock: a token bucket per key, in the app's one store.

Each key (a visitor: ``user:NAME`` or ``address:IP``) may spend ``per_minute`` a minute on
average and up to ``burst`` at once, whichever process (or replica) it knocks on; a full
bucket is the same as no record, so idle keys are dropped now and then and what is kept
stays bounded, whatever the number of addresses. ``LogThrottle`` is the same bucket kept
in memory, for what one process writes to its own log.

Usage::

    rate = Rate(store, "events", per_minute=600)
    await rate.allow("address:127.0.0.2")   # False: over the rate
"""

from __future__ import annotations

import time

from ..counts import Store

__all__ = ["LogThrottle", "Rate"]

PRUNE_EVERY = 1024  # checks between two sweeps of the idle keys
BUCKET = "SELECT tokens, at FROM counts_buckets WHERE rate = ? AND key = ?"
KEEP = (
    "INSERT INTO counts_buckets (rate, key, tokens, at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (rate, key) DO UPDATE SET tokens = excluded.tokens, at = excluded.at"
)
PRUNE = "DELETE FROM counts_buckets WHERE rate = ? AND tokens + (? - at) * ? >= ?"


class Bucket:
    """A token bucket's arithmetic: ``per_minute`` on average, ``burst`` at once (default:
    a third of a minute's)."""

    def __init__(self, per_minute: int, burst: int | None) -> None:
        self.per_minute = per_minute
        self.per_s = per_minute / 60.0
        self.burst = float(burst if burst is not None else max(1, per_minute // 3))

    def tokens(self, kept: tuple[float, float] | None, now: float) -> float:
        """The tokens of a bucket kept as (tokens, when), refilled to ``now``."""
        tokens, when = kept or (self.burst, now)
        return min(self.burst, tokens + (now - when) * self.per_s)


class Rate(Bucket):
    """The visitors' buckets of one rule (``name``), over every process of the store."""

    def __init__(
        self, store: Store, name: str, *, per_minute: int, burst: int | None = None
    ) -> None:
        super().__init__(per_minute, burst)
        self._store, self.name, self.clock = store, name, store.clock
        self._checks = 0

    async def allow(self, key: str, *, now: float | None = None) -> bool:
        """Spend one for ``key``; False (nothing spent) when its bucket is empty."""
        now = self.clock() if now is None else now
        self._checks += 1
        async with self._store.transaction() as tx:
            if self._checks % PRUNE_EVERY == 0:
                await tx.run(PRUNE, self.name, now, self.per_s, self.burst)
            tokens = self.tokens(await tx.row(BUCKET, self.name, key), now)
            allowed = tokens >= 1.0
            await tx.run(KEEP, self.name, key, tokens - 1.0 if allowed else tokens, now)
        return allowed

    async def retry_after_s(self, key: str, *, now: float | None = None) -> float:
        """How long until ``key`` may knock again (0: now)."""
        now = self.clock() if now is None else now
        async with self._store.reading() as tx:
            tokens = self.tokens(await tx.row(BUCKET, self.name, key), now)
        return max(0.0, (1.0 - tokens) / self.per_s)

    async def kept(self) -> int:
        """Buckets kept now (idle ones are dropped every ``PRUNE_EVERY`` checks)."""
        async with self._store.reading() as tx:
            return await tx.total("SELECT COUNT(*) FROM counts_buckets WHERE rate = ?", self.name)


class LogThrottle(Bucket):
    """One process's log lines about one key, at most ``per_minute`` (``burst`` at once):
    a flood is said, not written a thousand times."""

    def __init__(self, *, per_minute: int, burst: int = 1) -> None:
        super().__init__(per_minute, burst)
        self._kept: dict[str, tuple[float, float]] = {}

    def allow(self, key: str) -> bool:
        now = time.monotonic()
        if len(self._kept) >= PRUNE_EVERY:
            self._kept = {k: v for k, v in self._kept.items() if self.tokens(v, now) < self.burst}
        tokens = self.tokens(self._kept.get(key), now)
        self._kept[key] = (tokens - 1.0 if tokens >= 1.0 else tokens, now)
        return tokens >= 1.0
