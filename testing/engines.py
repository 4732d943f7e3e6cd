"""What the session's shared engines and apps look like to a test, and reading a reply.

The fixtures that start them are in ``tests/conftest.py``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from engine import ChatEngine, EngineStatus, StreamEvent, TextChunk

from .servers import AppServer

__all__ = ["DemoApp", "RunningEngine", "collect", "text_of"]


async def collect(stream: object) -> list[StreamEvent]:
    """Every event of a reply stream (closed after)."""
    events: list[StreamEvent] = []
    async with contextlib.aclosing(stream) as items:  # type: ignore[type-var]
        async for event in items:
            events.append(event)
    return events


def text_of(events: list[StreamEvent]) -> str:
    """The reply's text."""
    return "".join(e.text for e in events if isinstance(e, TextChunk))


@dataclass
class RunningEngine:
    engine: ChatEngine
    status_while_loading: EngineStatus


@dataclass(frozen=True)
class DemoApp:
    """The session's one ``chainlit run app.py`` on the local engine (the scripted model):
    the browser tests use it first (they meet it loading), then the operations
    endpoints and the soak."""

    server: AppServer
    first_readyz: tuple[int, dict[str, Any]]  # asked as soon as the page answered
