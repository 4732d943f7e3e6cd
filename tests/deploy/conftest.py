"""``python -m engine check --load`` as operators run it, twice at once (their engine
loads overlap): sized by the memory share, and with a share too small for vLLM's worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testing.servers import ROOT, clean_environ

CHECKS = {
    "sized by share": {},
    "share too small": {"ERNIE_GPU_MEMORY_UTILIZATION": "0.01"},
}


@pytest.fixture(scope="session")
def load_checks(
    demo_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, subprocess.CompletedProcess[str]]:
    folder = tmp_path_factory.mktemp("checks")
    started = {
        name: subprocess.Popen(
            [sys.executable, "-m", "engine", "check", "--load"],
            cwd=folder,
            env=clean_environ(
                PYTHONPATH=str(ROOT), ERNIE_MODEL=str(demo_model), ERNIE_WARMUP="false", **extra
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, extra in CHECKS.items()
    }
    finished = {name: process.communicate(timeout=300) for name, process in started.items()}
    return {
        name: subprocess.CompletedProcess(process.args, process.returncode, *finished[name])
        for name, process in started.items()
    }
