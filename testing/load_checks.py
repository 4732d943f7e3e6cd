"""The start-up checks as operators run them, at once: ``python -m engine check --load``
twice (their engine loads overlap), sized by the memory share and with a share too small
for vLLM's worker; ``chainlit run app.py`` with a bad setting, which stops at start; and
``bash scripts/start.sh --demo`` as a terminal runs it, stopped with Ctrl-C once ready.

Three processes that no test watches while they run: the session starts them at
collection, at the lowest priority (``testing.background``), so they run while the CPU
would idle, and the tests that read them (``tests/deploy``) find them done.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from engine.model.demo import write_demo_model

from .background import lowest_priority, to_normal_priority
from .polling import until_sync
from .servers import ROOT, clean_environ, free_port

__all__ = ["CHECKS", "CTRL_C", "run_load_checks"]

LOAD = ["-m", "engine", "check", "--load"]
APP = ["-m", "chainlit", "run", "app.py", "--headless", "--port", "1"]  # a developer's start
# Shares of RAM, not sizes: only vLLM knows the KV cache then. Small ones: the CPU backend's
# default (0.3, 7 GiB here) was checked against what the session's servers leave free.
CHECKS = {
    "sized by share": (LOAD, {"ERNIE_GPU_MEMORY_UTILIZATION": "0.08"}),
    "share too small": (LOAD, {"ERNIE_GPU_MEMORY_UTILIZATION": "0.01"}),
    "bad setting at start": (APP, {"ERNIE_BLOCK_SIZE": "48"}),
}


CTRL_C = "start.sh, then Ctrl-C"
# A terminal's shell runs a command with SIGINT at its default (a test runner's children may
# inherit it ignored, and bash cannot trap a signal ignored when it starts).
AS_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)
READY_LINE = "engine ready"


def run_load_checks() -> dict[str, subprocess.CompletedProcess[str]]:
    """Each check's outcome, by name: both run at once on a demo model of their own."""
    with tempfile.TemporaryDirectory(prefix="ernie-load-checks-") as name:
        return _run(Path(name))


def _run(folder: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    stopped: dict[str, subprocess.CompletedProcess[str]] = {}
    start_sh = threading.Thread(target=lambda: stopped.update({CTRL_C: _ctrl_c(folder)}))
    start_sh.start()
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
    start_sh.join(timeout=900)
    return stopped | {
        name: subprocess.CompletedProcess(process.args, process.returncode, *finished[name])
        for name, process in started.items()
    }


def _end_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)  # the script hands it to the launcher: all end


def _ctrl_c(folder: Path) -> subprocess.CompletedProcess[str]:
    """``bash scripts/start.sh --demo`` in a session of its own, as a terminal runs it,
    and once its engine is ready a Ctrl-C: SIGINT to its whole process group, with a busy
    CPU beside it. Its console (stdout and stderr) is the outcome's stdout; how long the
    stop took, its stderr ("stopped in 3.2 s")."""
    console = folder / "start-console.log"
    env = {"ERNIE_GPU_MEMORY_UTILIZATION": "0.08"}
    env["ERNIE_LOG_FILE"] = str(folder / "start-full.log")
    command = [*lowest_priority(), sys.executable, "-c", AS_A_TERMINAL, "bash"]
    command += ["scripts/start.sh", "--demo", "--port", str(free_port())]
    with console.open("w") as out:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=clean_environ(**env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    # A session of its own outlives the test run: ended with it if the run ends first.
    atexit.register(_end_group, process.pid)

    def ready_or_ended() -> bool:
        return READY_LINE in console.read_text() or process.poll() is not None

    with contextlib.suppress(AssertionError):  # not ready: its console says why
        until_sync(ready_or_ended, 600, "engine ready", interval_s=0.5)
    # Stopped as an operator's terminal runs it (the normal class, not the loading's idle
    # one), with a busy CPU beside it: the suite's, and a loop of its own.
    with contextlib.suppress(psutil.NoSuchProcess):
        to_normal_priority(process.pid)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    asked = time.monotonic()
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    finally:
        busy.kill()
        busy.wait()
    stopped_in = f"stopped in {time.monotonic() - asked:.1f} s"
    return subprocess.CompletedProcess(command, process.returncode, console.read_text(), stopped_in)
