"""A group's worker: one Chainlit front end on its engine core's attachment (``serve.group``).

Workers fork from one server process (``multiprocessing``'s forkserver) that imported
what they run once: vLLM's client side, torch, transformers and Chainlit. A spawned
worker imported them itself, about 10 s of CPU each, four at a group's start and two
more at every restart of a unit, whose chats waited on it. The server imports no
module that keeps state per process at import: ``chat.metrics`` would leave a
Prometheus file under the server's own pid beside the workers'.

Usage::

    process = worker_context().Process(target=run_worker, args=(plan, core, slot, ...))
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from multiprocessing.context import ForkServerContext
from pathlib import Path

from setproctitle import setproctitle

from engine import Attachment, Plan, SharedCore

from .units import Slot
from .web import APP, configure_logging, serve_app

__all__ = ["WORKER_TITLE", "run_worker", "worker_context"]

WORKER_TITLE = "ernie-chat worker"
# What the forkserver imports before its first fork: this module (vLLM's client through
# ``engine``, uvicorn) and Chainlit's server, which reads its config when imported.
PRELOAD = ["serve.worker", "engine.replies", "engine.shared_core", "chainlit.server"]


def worker_context() -> ForkServerContext:
    """The context that starts workers; its server starts on the first worker (or
    earlier, on ``start_server``)."""
    # Chainlit reads .chainlit/ and chainlit.md from its app root when imported, and the
    # server imports it from the launcher's folder: the app's folder, as serve_app's.
    os.environ.setdefault("CHAINLIT_APP_ROOT", str(APP.parent))
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def start_server() -> None:
    """Start the forkserver's imports now, beside the launcher's own work (the first
    worker's start waits for them)."""
    worker_context()
    from multiprocessing import forkserver

    forkserver.ensure_running()


def run_worker(
    plan: Plan, core: SharedCore | None, slot: Slot, folder: Path, public_host: str
) -> None:
    """A worker's process: front end ``slot.index`` of its core, serving on ``slot.port``."""
    setproctitle(f"{WORKER_TITLE} {slot.number}")  # what ps and top show
    configure_logging(plan.settings)
    if slot.index > 0:  # its core's first worker reports the capacity, warm-up and ready
        logging.getLogger("engine.supervisor").setLevel(logging.WARNING)
    attachment = Attachment(plan, core, slot.index, folder, worker=slot.number)
    serve_app(plan, ("127.0.0.1", slot.port), public_host=public_host, attachment=attachment)
