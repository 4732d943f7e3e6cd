"""Waiting for a condition without blocking the event loop, with a clear failure.

Usage::

    await until(lambda: engine.running_requests == 0, within_s=10, what="no request")
    body = await until(lambda: readyz_body() if ready() else None, 60, "ready")
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["until"]


async def until(
    condition: Callable[[], Any | Awaitable[Any]],
    within_s: float,
    what: str,
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
        assert time.monotonic() < deadline, f"no {what} in {within_s} s"
        await asyncio.sleep(interval_s)
