"""The start-up checks as operators run them, at once: ``python -m engine check --load``
twice (their engine loads overlap), sized by the memory share and with a share too small
for vLLM's worker; and ``chainlit run app.py`` with a bad setting, which stops at start.

Three processes that no test watches while they run: the session starts them at
collection, at the lowest priority (``testing.background``), so they run while the CPU
would idle, and the tests that read them (``tests/deploy``) find them done.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from engine.model.demo import write_demo_model

from .background import lowest_priority
from .servers import ROOT, clean_environ

__all__ = ["CHECKS", "run_load_checks"]

LOAD = ["-m", "engine", "check", "--load"]
APP = ["-m", "chainlit", "run", "app.py", "--headless", "--port", "1"]  # a developer's start
# Shares of RAM, not sizes: only vLLM knows the KV cache then. Small ones: the CPU backend's
# default (0.3, 7 GiB here) was checked against what the session's servers leave free.
CHECKS = {
    "sized by share": (LOAD, {"ERNIE_GPU_MEMORY_UTILIZATION": "0.08"}),
    "share too small": (LOAD, {"ERNIE_GPU_MEMORY_UTILIZATION": "0.01"}),
    "bad setting at start": (APP, {"ERNIE_BLOCK_SIZE": "48"}),
}


def run_load_checks() -> dict[str, subprocess.CompletedProcess[str]]:
    """Each check's outcome, by name: both run at once on a demo model of their own."""
    with tempfile.TemporaryDirectory(prefix="ernie-load-checks-") as name:
        return _run(Path(name))


def _run(folder: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    model = write_demo_model(folder / "model")
    started = {
        name: subprocess.Popen(
            [*lowest_priority(), sys.executable, *command],
            cwd=ROOT if command is APP else folder,
            env=clean_environ(
                PYTHONPATH=str(ROOT), ERNIE_MODEL=str(model), ERNIE_WARMUP="false", **extra
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, (command, extra) in CHECKS.items()
    }
    finished = {name: process.communicate(timeout=900) for name, process in started.items()}
    return {
        name: subprocess.CompletedProcess(process.args, process.returncode, *finished[name])
        for name, process in started.items()
    }
