"""Tokens a visitor may spend a day (``ERNIE_DAILY_TOKENS``), in the app's one store.

A reply spends what the engine counted for it: its prompt (the chat so far, the system
prompt) and its reply, so a long chat spends more a message, as it costs the GPU more. A
day is the server's calendar day (its ``TZ``): the quota is whole again at midnight. The
visitor is the same key the other limits count (``user:NAME`` signed in, else
``address:IP``), whichever process or replica the visitor reaches.

Usage::

    quota = DailyTokens(store, per_day=200_000)
    await quota.check(tx, "user:alice")   # LimitExceededError("daily_tokens") when spent
    left = await quota.spend("user:alice", 1200)   # the share of today's left, 0..1
"""

from __future__ import annotations

import datetime as dt

from ..counts import Store, Tx
from ..errors import LimitExceededError

__all__ = ["LOW_SHARE", "DailyTokens"]

LOW_SHARE = 0.2  # below this share of the day's tokens, each reply's footer says what is left
SPENT = "SELECT tokens FROM counts_spent WHERE visitor = ? AND day = ?"


class DailyTokens:
    """The day's tokens of each visitor (see the module's text)."""

    def __init__(self, store: Store, *, per_day: int) -> None:
        self._store = store
        self.per_day = per_day

    @staticmethod
    def _today() -> tuple[str, float]:
        """Today's date, and the seconds until tomorrow (the server's time zone)."""
        now = dt.datetime.now().astimezone()
        tomorrow = (now + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        return now.date().isoformat(), (tomorrow - now).total_seconds()

    async def check(self, tx: Tx, user: str) -> None:
        """``LimitExceededError`` when ``user`` spent the day's tokens."""
        day, until_tomorrow = self._today()
        if await tx.total(SPENT, user, day) >= self.per_day:
            raise LimitExceededError("daily_tokens", self.per_day, retry_after_s=until_tomorrow)

    async def spend(self, user: str, tokens: int) -> float:
        """Count a reply's tokens; the share of the day's tokens ``user`` has left."""
        day, _ = self._today()
        async with self._store.transaction() as tx:
            await tx.run(
                "INSERT INTO counts_spent (visitor, day, tokens) VALUES (?, ?, ?) "
                "ON CONFLICT (visitor, day) DO UPDATE SET tokens = counts_spent.tokens + "
                "excluded.tokens",
                user,
                day,
                tokens,
            )
            await tx.run("DELETE FROM counts_spent WHERE day < ?", day)
            spent = await tx.total(SPENT, user, day)
        return max(0.0, 1.0 - spent / self.per_day)

    def left(self, share: float) -> int:
        return round(share * self.per_day)
