"""A chat's writes under way, so that a read of the chat sees them.

Chainlit writes a chat in tasks it does not wait for: a message's step (``_create``), a
reply's last text (``update``), the first message's owner and name (``init_thread``). A
read that came right after them (the Share button under a reply that had just ended, an
export, a reload's resume) read the chat as it was before: with no owner yet it was "not
the user's chat", and its last reply was missing. Each write of a chat is noted here while
it runs, and a read of that chat waits for the writes other tasks began before it.

Usage::

    async with writes.writing(thread_id):    # in each write
        ...
    await writes.settled(thread_id)          # before a read
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

__all__ = ["SETTLE_S", "PendingWrites"]

logger = logging.getLogger(__name__)

SETTLE_S = 15.0  # a read waits this long at most (a database that hangs: it reads anyway)


class PendingWrites:
    """The writes under way, per chat, with the task that runs each."""

    def __init__(self) -> None:
        self._open: dict[str, list[tuple[asyncio.Task[object] | None, asyncio.Future[None]]]] = {}

    @contextlib.asynccontextmanager
    async def writing(self, thread_id: str | None) -> AsyncIterator[None]:
        """One write of the chat ``thread_id`` (None: of no known chat), while it runs."""
        if thread_id is None:
            yield
            return
        entry = (asyncio.current_task(), asyncio.get_running_loop().create_future())
        self._open.setdefault(thread_id, []).append(entry)
        try:
            yield
        finally:
            entry[1].set_result(None)
            left = [kept for kept in self._open.get(thread_id, []) if kept is not entry]
            if left:
                self._open[thread_id] = left
            else:
                self._open.pop(thread_id, None)

    async def settled(self, thread_id: str, timeout_s: float = SETTLE_S) -> None:
        """Once the chat's writes that other tasks run now are done (this task's own are
        under way around the read: waiting for them would wait for itself)."""
        me = asyncio.current_task()
        others = [done for task, done in self._open.get(thread_id, []) if task is not me]
        if others:
            _, late = await asyncio.wait(others, timeout=timeout_s)
            if late:
                logger.warning("history: read a chat with %d writes still under way", len(late))
