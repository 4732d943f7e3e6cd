"""``python -m engine check --load`` as operators run it, twice at once (their engine loads
overlap): sized by the memory share, and with a share too small for vLLM's worker.

Two engine loads that no other test waits on: the session starts them at collection, at the
lowest priority (``testing.background``), so they load while the CPU would idle, and the
tests that read them (``tests/deploy``) find them done.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from deploy.demo_model import write_demo_model

from .background import lowest_priority
from .servers import ROOT, clean_environ

__all__ = ["CHECKS", "run_load_checks"]

# Shares of RAM, not sizes: only vLLM knows the KV cache then. Small ones: the CPU backend's
# default (0.3, 7 GiB here) was checked against what the session's servers leave free.
CHECKS = {
    "sized by share": {"ERNIE_GPU_MEMORY_UTILIZATION": "0.08"},
    "share too small": {"ERNIE_GPU_MEMORY_UTILIZATION": "0.01"},
}


def run_load_checks() -> dict[str, subprocess.CompletedProcess[str]]:
    """Each check's outcome, by name: both run at once on a demo model of their own."""
    with tempfile.TemporaryDirectory(prefix="ernie-load-checks-") as name:
        return _run(Path(name))


def _run(folder: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    model = write_demo_model(folder / "model")
    started = {
        name: subprocess.Popen(
            [*lowest_priority(), sys.executable, "-m", "engine", "check", "--load"],
            cwd=folder,
            env=clean_environ(
                PYTHONPATH=str(ROOT), ERNIE_MODEL=str(model), ERNIE_WARMUP="false", **extra
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, extra in CHECKS.items()
    }
    finished = {name: process.communicate(timeout=900) for name, process in started.items()}
    return {
        name: subprocess.CompletedProcess(process.args, process.returncode, *finished[name])
        for name, process in started.items()
    }
