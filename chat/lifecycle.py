"""The app process's start and end: the history's tables, the engine in the background,
and a clean exit when the engine cannot be rebuilt."""

from __future__ import annotations

import asyncio
import logging
import os
import sys

from settings.urls import redact

from .conversation import ExchangeSigner
from .counts import forget, keep_alive
from .history.reach import history_problem
from .history.schema import create_schema
from .runtime import Runtime

__all__ = ["EXIT_GRACE_S", "start", "stop"]

logger = logging.getLogger(__name__)

EXIT_GRACE_S = 5.0


async def start(rt: Runtime) -> None:
    """Open the history, then load the engine in the background: the page answers, and
    says it is loading. A group's worker waits for its engine instead (uvicorn opens the
    port after this): until its core is ready, HAProxy sends its pages to a worker whose
    core serves, or shows its starting page, instead of holding them on a worker whose
    unit restarts."""
    if rt.history_url is not None:
        since = await _open_history(rt.history_url)
        rt.seal = ExchangeSigner(rt.seal.key, legacy_before=since)
    await _open_counts(rt)
    loop = asyncio.get_running_loop()
    rt.background = [loop.create_task(keep_alive(rt.store))]
    rt.engine.start()
    rt.background.append(loop.create_task(_exit_when_the_engine_gives_up(rt)))
    if rt.worker is not None:
        await rt.engine.wait_ready()  # a failed load ends the worker: its unit restarts


async def stop(rt: Runtime) -> None:
    """End the engine in order (its core's teardown waited for, not killed)."""
    if rt.worker is None:  # a group's launcher says it once for all its workers
        logger.info("stopping: the engine ends, then the app")
    await rt.engine.shutdown()


async def _open_history(url: str) -> str:
    """Create the history's tables where missing (and return since when its exchanges
    are signed); a database that cannot be opened stops the app at start, in one line."""
    try:
        since = await create_schema(url)
    except Exception as exc:
        print(f"error: {history_problem(url, exc)}", file=sys.stderr, flush=True)
        os._exit(2)  # Chainlit only logs a failed startup hook: stop the process here
    logger.info("chat history in %s", redact(url))
    return since


async def _open_counts(rt: Runtime) -> None:
    """Forget what this process held in the store before it started again; a store that
    cannot be opened stops the app at start, in one line."""
    try:
        await forget(rt.store, [rt.store.owner])
    except Exception as exc:
        url = rt.settings.counts_url or ""
        print(f"error: {history_problem(url, exc, 'counts_url')}", file=sys.stderr, flush=True)
        os._exit(2)


async def _exit_when_the_engine_gives_up(rt: Runtime) -> None:
    """The engine died and every rebuild failed: ``/readyz`` says so for a moment, then
    the process exits 1 for its supervisor to start a fresh one."""
    reason = await rt.engine.wait_gave_up()
    logger.critical("exiting in %.0f s: %s", EXIT_GRACE_S, reason)
    await asyncio.sleep(EXIT_GRACE_S)
    logging.shutdown()
    os._exit(1)  # the engine's processes are already gone; nothing else needs closing
