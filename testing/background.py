"""Slow work that waits on the network and the disk more than on the CPU (the image's build,
the GPU lock's dry run), started as soon as the session knows a test needs it, so it runs
beside the tests that need the CPU, at the lowest priority, and is done when its test comes.

Under pytest-xdist the controller runs it (it is idle while its workers test) and writes the
outcome, as JSON, to a folder every worker is told of; a worker's test reads it from there.

Usage::

    start("image", lambda: build_image(...))                 # at collection (tests/conftest.py)
    start("image", lambda: build_image(...), report_to=dir)  # in xdist's controller
    read_from(dir)                                           # in each xdist worker
    image = result("image", lambda: build_image(...), timeout_s=1800)   # in the test
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["BackgroundError", "read_from", "result", "start"]


class BackgroundError(RuntimeError):
    """The work failed in another process; the message is its error, as that process had it."""


class _Job(threading.Thread):
    def __init__(self, name: str, work: Callable[[], Any], report_to: Path | None) -> None:
        super().__init__(name=f"background {name}", daemon=True)
        self.work = work
        self.report = None if report_to is None else report_to / f"{name}.json"
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.value = self.work()
        except BaseException as exc:  # handed to the test that waits for it
            self.error = exc
        if self.report is not None:
            outcome = {
                "value": self.value,
                "error": None if self.error is None else repr(self.error),
            }
            partial = self.report.with_suffix(".partial")
            partial.write_text(json.dumps(outcome), encoding="utf-8")
            partial.rename(self.report)  # whole or absent for the reader


_jobs: dict[str, _Job] = {}
_elsewhere: list[Path] = []  # the folder another process reports its jobs to


def start(name: str, work: Callable[[], Any], *, report_to: Path | None = None) -> None:
    """Run ``work`` in the background (once per session and name); with ``report_to``, its
    outcome is also written there for other processes."""
    if name not in _jobs:
        _jobs[name] = job = _Job(name, work, report_to)
        job.start()


def read_from(folder: Path) -> None:
    """This process's tests take the outcomes another process writes to ``folder``."""
    _elsewhere[:] = [folder]


def result(name: str, work: Callable[[], Any], *, timeout_s: float) -> Any:
    """What the background ``work`` of ``name`` gave (run here if it was never started);
    its error, raised again; TimeoutError after ``timeout_s``."""
    if _elsewhere:
        return _reported(_elsewhere[0] / f"{name}.json", name, timeout_s)
    start(name, work)
    job = _jobs[name]
    job.join(timeout_s)
    if job.is_alive():
        raise TimeoutError(f"{name}: not done after {timeout_s} s")
    if job.error is not None:
        raise job.error
    return job.value


def _reported(report: Path, name: str, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while not report.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: no outcome in {report} after {timeout_s} s")
        time.sleep(1)  # a file another process writes: nothing to wait on but its presence
    outcome = json.loads(report.read_text(encoding="utf-8"))
    if outcome["error"] is not None:
        raise BackgroundError(f"{name}: {outcome['error']}")
    return outcome["value"]


def lowest_priority() -> list[str]:
    """A command prefix that runs a process (and what it starts) on the CPU and the disk
    only when nothing else wants them (Linux's idle scheduling class: the tests keep their
    timing; nice 19 alone still took a third of the CPU from the tests' servers)."""
    return ["chrt", "--idle", "0", "ionice", "-c", "3"] if os.name == "posix" else []
