"""Waiting for a condition, with a deadline and a clear failure: the one way the tests and
the harness wait (``until`` on the event loop, ``until_sync`` in a thread or a sync test).

Usage::

    await until(lambda: engine.running_requests == 0, within_s=10, what="no request")
    body = await until(lambda: readyz_body() if ready() else None, 60, "ready")
    until_sync(lambda: server.ready(), 300, lambda: f"ready: {log.read_text()[-2000:]}")

A condition may raise to stop the wait at once (a server that exited); ``what`` may be a
function, called only on failure (a log's end, read when it is needed).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["until", "until_sync"]

What = str | Callable[[], str]


def _failure(what: What, within_s: float) -> str:
    return f"no {what() if callable(what) else what} in {within_s} s"


async def until(
    condition: Callable[[], Any | Awaitable[Any]],
    within_s: float,
    what: What,
    *,
    interval_s: float = 0.05,
) -> Any:
    """The first truthy value of ``condition()`` (sync or async), polled every
    ``interval_s``; AssertionError naming ``what`` after ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        assert time.monotonic() < deadline, _failure(what, within_s)
        await asyncio.sleep(interval_s)


def until_sync(
    condition: Callable[[], Any], within_s: float, what: What, *, interval_s: float = 0.2
) -> Any:
    """``until`` for code off the event loop: it sleeps between tries."""
    deadline = time.monotonic() + within_s
    while not (value := condition()):
        assert time.monotonic() < deadline, _failure(what, within_s)
        time.sleep(interval_s)
    return value
