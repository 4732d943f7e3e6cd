"""Sign-in tries and sign-outs, counted in the app's one store (``chat.counts``): a lone
process's, a group's file, or the replicas' PostgreSQL: a guess is counted once, whichever
process checks it. (Replies at once and messages a minute are ``chat.access.turns``.)
"""

from __future__ import annotations

import json

from ..counts import Store

__all__ = ["WINDOW_S", "SignInAttempts", "SignOuts"]

WINDOW_S = 60.0
TRIES = "SELECT COUNT(*) FROM counts_sign_in_tries WHERE key = ? AND at > ?"
NEWEST = (
    "DELETE FROM counts_sign_in_tries WHERE id = (SELECT id FROM counts_sign_in_tries "
    "WHERE key = ? ORDER BY at DESC, id DESC LIMIT 1)"
)


class SignInAttempts:
    """Failed sign-ins in a sliding window, so guessing is slow and no stranger can lock a
    user out: a name guessed from one address, or many names from one address, is refused
    there after ``max_failures`` in the window; a name that failed that often from
    anywhere is only slowed (``delay_s``), its right password still signs in."""

    def __init__(
        self,
        store: Store,
        *,
        max_failures: int = 10,
        window_s: float = 300.0,
        slowest_s: float = 8.0,
    ) -> None:
        self._store = store
        self.clock = store.clock
        self._max_failures = max_failures
        self._window_s = window_s
        self._slowest_s = slowest_s

    @staticmethod
    def keys(name: str, address: str) -> tuple[str, str, str]:
        """What a try counts for: this name from this address, this address, this name."""
        pair = json.dumps([address, name])  # no NUL byte: PostgreSQL's text holds none
        return f"pair:{pair}", f"address:{address}", f"name:{name}"

    def delay_for(self, failures: int) -> float:
        """0, then 1 s, doubling with each further ``max_failures`` failures, up to
        ``slowest_s``."""
        if failures < self._max_failures:
            return 0.0
        return float(min(self._slowest_s, 2 ** (failures // self._max_failures - 1)))

    async def begin(self, name: str, address: str, *, now: float | None = None) -> bool:
        """Count a try before it is checked (a failure until ``succeeded`` says otherwise:
        tries sent at once are all counted); False, not counted, where it is locked."""
        now = self.clock() if now is None else now
        pair, by_address, by_name = self.keys(name, address)
        since = now - self._window_s
        async with self._store.transaction() as tx:
            await tx.run("DELETE FROM counts_sign_in_tries WHERE at <= ?", since)
            failures = [await tx.total(TRIES, key, since) for key in (pair, by_address)]
            if max(failures) >= self._max_failures:
                return False
            for key in (pair, by_address, by_name):
                await tx.run("INSERT INTO counts_sign_in_tries (key, at) VALUES (?, ?)", key, now)
            return True

    async def succeeded(self, name: str, address: str) -> None:
        """The try ``begin`` counted was right: it is no failure."""
        async with self._store.transaction() as tx:
            for key in self.keys(name, address):
                await tx.run(NEWEST, key)

    async def delay_s(self, name: str, *, now: float | None = None) -> float:
        """How long a try for ``name`` waits: 0, then 1 s, doubling with each further
        ``max_failures`` failures from anywhere, up to ``slowest_s``."""
        now = self.clock() if now is None else now
        async with self._store.reading() as tx:
            failures = await tx.total(TRIES, self.keys(name, "")[2], now - self._window_s)
        return self.delay_for(failures)


class SignOuts:
    """Sign-ins their user signed out of (``POST /logout``), each kept until its tokens
    would have ended anyway: a token copied before the sign-out no longer works. Times are
    Unix times (a token's)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def sign_out(self, user: str, signed_in_at: float, *, until: float, now: float) -> None:
        async with self._store.transaction() as tx:
            await tx.run("DELETE FROM counts_sign_outs WHERE until <= ?", now)
            await tx.run(
                "INSERT INTO counts_sign_outs (visitor, signed_in_at, until) VALUES (?, ?, ?) "
                "ON CONFLICT (visitor, signed_in_at) DO UPDATE SET until = excluded.until",
                user,
                signed_in_at,
                until,
            )

    async def signed_out(self, user: str, signed_in_at: float) -> bool:
        query = "SELECT COUNT(*) FROM counts_sign_outs WHERE visitor = ? AND signed_in_at = ?"
        async with self._store.reading() as tx:
            return await tx.total(query, user, signed_in_at) > 0
