"""``python -m bench --shapes ...``: the load shapes of ``testing.shapes`` at scale, against
the app as ``python -m serve`` starts it with the run's settings (its own defaults for the
workers and engine cores, unless the run sets them).

Each shape reports messages sent, answered, refused with a message, and lost (must be 0);
``idle-tabs`` also the chats' first token with and without the idle tabs held, and
``slow-reader`` whether the server ended the reader that stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from testing.servers import AppServer
from testing.shapes import SlowReader, Tally, at_connect, back_to_back, reconnect, with_idle_tabs

from .paths import PROMPT, READY_TIMEOUT_S, UNLIMITED

__all__ = ["SHAPES", "run_shapes", "shapes_table"]

SHAPES = ("at-connect", "back-to-back", "reconnect", "idle-tabs", "slow-reader")


async def _idle_tabs(url: str, chats: int, tabs: int) -> list[Tally]:
    before = await at_connect(url, chats, text=PROMPT)
    before.shape = "chats, no idle tabs"
    async with with_idle_tabs(url, tabs, per_address=50) as held:
        during = await at_connect(url, chats, text=PROMPT)
    during.shape = f"chats beside {held} idle tabs"
    return [before, during]


async def _slow_reader(url: str, chats: int, timeout_s: float) -> list[Tally]:
    slow = SlowReader(url)
    async with slow.stopped(PROMPT) as ended:
        beside = await at_connect(url, chats, text=PROMPT)
        beside.shape = "chats beside a slow reader"
        stopped = Tally("the slow reader ended by the server")
        stopped.sent, stopped.answered = 1, int(await ended(timeout_s + 5))
    return [beside, stopped]


async def _one(name: str, url: str, chats: int, bursts: int, tabs: int) -> list[Tally]:
    if name == "at-connect":
        return [await at_connect(url, chats, text=PROMPT)]
    if name == "back-to-back":
        return [await back_to_back(url, chats, bursts, text=PROMPT)]
    if name == "reconnect":
        return [(await reconnect(url, chats, text=PROMPT))[0]]
    if name == "idle-tabs":
        return await _idle_tabs(url, chats, tabs)
    timeout_s = float(os.environ.get("ERNIE_SOCKET_TIMEOUT_S", "40"))
    return await _slow_reader(url, chats, timeout_s)


async def run_shapes(
    names: list[str], *, chats: int, bursts: int, tabs: int, logs: Path, url: str | None
) -> list[dict[str, Any]]:
    """Every shape named, in turn, on one app: started for them, or the one at ``url``."""
    async with contextlib.AsyncExitStack() as stack:
        if url is None:
            url = await stack.enter_async_context(_started(logs))
        rows: list[dict[str, Any]] = []
        for name in names:
            for tally in await _one(name, url, chats, bursts, tabs):
                rows.append({"shape": name} | tally.as_dict() | {"case": tally.shape})
                print(f"shape {name}: {tally.as_dict()}", file=sys.stderr, flush=True)
        return rows


@contextlib.asynccontextmanager
async def _started(logs: Path) -> AsyncIterator[str]:
    """The app as ``python -m serve`` starts it with the run's settings, limits lifted."""
    env = {**UNLIMITED, **{k: v for k, v in os.environ.items() if k.startswith("ERNIE_")}}
    with AppServer.run(env, logs / "shapes-app.log") as server:
        await asyncio.to_thread(server.wait, "/readyz", READY_TIMEOUT_S)
        with contextlib.suppress(IndexError):  # a group: every unit up, not just the first
            if server.worker_urls():
                await server.every_worker_ready(READY_TIMEOUT_S)
        yield server.url


def shapes_table(rows: list[dict[str, Any]]) -> str:
    header = ("case", "sent", "answered", "refused", "lost", "ttft_p50_ms")
    lines = [[*header], *[[str(row[key]) for key in header] for row in rows]]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in lines
    )
