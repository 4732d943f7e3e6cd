"""A group's units: an engine core and the workers attached to it (``serve.group``).

What starts, ends and restarts together; the launcher holds one per engine core.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess

from engine import SharedCore, exit_reason

__all__ = ["METRICS_DIR", "Slot", "Unit", "Worker", "visible_devices"]

METRICS_DIR = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's multiprocess mode


def _ended(process: BaseProcess) -> str:
    reason = exit_reason(process.exitcode or 0)  # engine.core_errors' words for exit codes
    return f"was {reason}" if reason.startswith("killed") else reason


@dataclass(frozen=True)
class Slot:
    number: int  # over the whole group
    index: int  # the client index on its engine core
    port: int


@dataclass
class Worker:
    slot: Slot
    process: BaseProcess


@dataclass
class Unit:
    """Engine core ``number`` and its workers: what starts, ends and restarts together."""

    number: int
    slots: list[Slot]
    core: SharedCore | None = None
    workers: list[Worker] = field(default_factory=list)
    tries: int = 0  # restarts in a row
    started: float = 0.0

    def sentinels(self) -> list[int]:
        own = [w.process.sentinel for w in self.workers]
        return own + (self.core.sentinels() if self.core else [])

    def ended(self) -> str | None:
        """The first of its processes to end, as one line, or None while all run."""
        for worker in self.workers:
            process = worker.process
            if process.exitcode is not None:
                return f"worker {worker.slot.number} (pid {process.pid}) {_ended(process)}"
        return self.core.dead() if self.core else None

    def stop(self) -> None:
        _stop_all(self.workers)
        self.workers = []
        if self.core is not None:
            self.core.shutdown()
            self.core = None


@contextlib.contextmanager
def visible_devices(devices: str | None) -> Iterator[None]:
    """``CUDA_VISIBLE_DEVICES`` for the engine core started in the block (it inherits it)."""
    if devices is None:
        yield
        return
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = devices
    try:
        yield
    finally:
        if before is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before


def _stop_all(workers: list[Worker]) -> None:
    """Stop the workers (SIGTERM, then SIGKILL after 10 s) and drop their live metrics."""
    from prometheus_client import multiprocess

    for worker in workers:
        if worker.process.exitcode is None:
            worker.process.terminate()
    deadline = time.monotonic() + 10
    for worker in workers:
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.exitcode is None:
            worker.process.kill()
            worker.process.join()
        if os.environ.get(METRICS_DIR) and worker.process.pid is not None:
            multiprocess.mark_process_dead(worker.process.pid)  # type: ignore[no-untyped-call]
