"""Slow work that no test watches while it runs (the image's build, the GPU lock's dry run,
the engine's load checks, the loading of the session's ``vllm serve``), started as soon as
the session knows a test needs it, so it runs beside the tests at the lowest priority, on
the CPU they leave idle, and is done when its test comes.

A job starts its processes with ``environ()``: a copy of the environment taken when the job
started, never the live one. The tests set and unset variables meanwhile, and glibc's
``setenv`` moves the array that a process started from another thread reads while it
execs: a fresh clone's image build once failed there with ``OSError: [Errno 14] Bad
address``, and ``tests/tools/test_background.py`` makes it fail in most tries.

Usage::

    start("image", lambda: build_image(...))       # at collection (tests/conftest.py)
    image = result("image", lambda: build_image(...), timeout_s=1800)   # in the test
    subprocess.run(command, env=environ())         # in a job's work
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import psutil

if TYPE_CHECKING:
    import pytest

__all__ = [
    "environ",
    "lowest_priority",
    "raised_until_ready",
    "result",
    "start",
    "start_early",
    "to_normal_priority",
]


class _Job(threading.Thread):
    def __init__(self, name: str, work: Callable[[], Any]) -> None:
        super().__init__(name=f"background {name}", daemon=True)
        self.work = work
        self.value: Any = None
        self.error: BaseException | None = None
        self.environ = dict(os.environ)  # taken by the thread that starts the job

    def run(self) -> None:
        try:
            self.value = self.work()
        except BaseException as exc:  # handed to the test that waits for it
            self.error = exc


_jobs: dict[str, _Job] = {}
RAISE_EVERY_S = 5.0  # how often a waited-for job's new processes are raised


def start(name: str, work: Callable[[], Any]) -> None:
    """Run ``work`` in the background (once per session and name)."""
    if name not in _jobs:
        _jobs[name] = job = _Job(name, work)
        job.start()


def result(name: str, work: Callable[[], Any], *, timeout_s: float) -> Any:
    """What the background ``work`` of ``name`` gave (run here if it was never started);
    its error, raised again; TimeoutError after ``timeout_s``. While a test waits for it,
    the session's idle-class processes are raised to the normal class every few seconds:
    nothing else of the session runs then, and on a machine kept busy by others the idle
    class got no CPU at all (a fresh cache's GPU lock dry run timed out after 600 s)."""
    start(name, work)
    job = _jobs[name]
    waited = 0.0
    while job.is_alive() and waited < timeout_s:
        to_normal_priority(os.getpid())
        job.join(min(RAISE_EVERY_S, timeout_s - waited))
        waited += RAISE_EVERY_S
    if job.is_alive():
        raise TimeoutError(f"{name}: not done after {timeout_s} s")
    if job.error is not None:
        raise job.error
    return job.value


def environ(**values: str) -> dict[str, str]:
    """The environment to start a process with, plus ``values``: in a job, the copy taken
    when it started; elsewhere, a copy of the live one."""
    thread = threading.current_thread()
    base = thread.environ if isinstance(thread, _Job) else os.environ
    return dict(base) | values


def lowest_priority() -> list[str]:
    """A command prefix that runs a process (and what it starts) on the CPU and the disk
    only when nothing else wants them (Linux's idle scheduling class: the tests keep their
    timing; nice 19 alone still took a third of the CPU from the tests' servers)."""
    return ["chrt", "--idle", "0", "ionice", "-c", "3"] if os.name == "posix" else []


def to_normal_priority(pid: int) -> None:
    """Every thread of ``pid`` and of the processes under it, started under
    ``lowest_priority()``, back to the normal class: a server loaded on idle CPU serves
    its tests as any other (a thread keeps its own class, and passes it on)."""
    root = psutil.Process(pid)
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            for thread in process.threads():
                with contextlib.suppress(OSError, psutil.Error):
                    os.sched_setscheduler(thread.id, os.SCHED_OTHER, os.sched_param(0))
                    psutil.Process(thread.id).ionice(psutil.IOPRIO_CLASS_BE)


def raised_until_ready(pid: int, ready: Callable[[], object]) -> None:
    """``pid``'s tree at the normal priority before ``ready`` waits for it (it loads at full
    speed now), and again after (what it started meanwhile may have taken the idle class
    from a thread not yet raised)."""
    to_normal_priority(pid)
    ready()
    to_normal_priority(pid)


def start_early(request: pytest.FixtureRequest, early: Mapping[str, str]) -> None:
    """For each fixture a selected test needs (a key of ``early``), request its loading
    fixture (the value): a server started under ``lowest_priority()`` and not waited for,
    which loads on the CPU the tests before it leave idle."""
    for needed, loading in early.items():
        if any(needed in getattr(item, "fixturenames", ()) for item in request.session.items):
            request.getfixturevalue(loading)
