"""``bash scripts/start.sh --demo`` as an operator runs it in a terminal, stopped with
Ctrl-C with a busy CPU beside it (``testing.load_checks`` ran it beside the other
start-up checks and the suite): one line, and gone within ``STOP_S``."""

from __future__ import annotations

import subprocess

from testing.load_checks import CTRL_C, READY_LINE

STOPPING = "INFO chat.lifecycle: stopping: the engine ends, then the app"
STOP_S = 10  # a stop's promise, whatever the load (16.5 s and four of vLLM's lines before)


def test_ctrl_c_stops_the_app_with_its_own_line_and_nothing_else(
    load_checks: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    stopped = load_checks[CTRL_C]
    console = stopped.stdout.splitlines()
    assert any(READY_LINE in line for line in console), stopped.stdout[-3000:]
    after = console[next(i for i, line in enumerate(console) if READY_LINE in line) + 1 :]
    assert [line.split(" ", 2)[-1] for line in after] == [STOPPING], stopped.stdout[-3000:]
    assert stopped.returncode == 0, stopped.stdout[-3000:]
    took = float(stopped.stderr.split()[-2])  # a busy CPU beside it (testing.load_checks)
    assert took < STOP_S, stopped.stderr
