"""py-spy on the serving processes of a path while its open loop runs (``--profile``): where
a worker spends its CPU on each message and each frame, as folded stacks (``-f raw``).

Usage::

    with profiled(pid, out / "app-pyspy.txt"):
        ...   # the load
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

__all__ = ["profiled"]


@contextlib.contextmanager
def profiled(pid: int | None, out: Path) -> Iterator[None]:
    """Sample ``pid`` and its children at 200 Hz for the block (nothing when ``pid`` is None
    or py-spy is missing)."""
    binary = shutil.which("py-spy")
    if pid is None or binary is None:
        yield
        return
    command = [binary, "record", "--pid", str(pid), "--subprocesses", "--nonblocking"]
    command += ["--rate", "200", "--format", "raw", "--output", str(out)]
    spy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its samples when interrupted
        with contextlib.suppress(subprocess.TimeoutExpired):
            spy.wait(timeout=60)
