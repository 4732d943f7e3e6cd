"""A background job's processes start while the tests change the environment.

The tests set and unset variables (``monkeypatch.setenv``, the app's own start-up) while
the image builds in a thread; a process started there with the live environment reads an
array that glibc's ``setenv`` moves under it, and exec fails with EFAULT ("Bad address":
in 675 of 851 tries on this machine, ``testing.background``'s docstring). A job's
``environ()`` is its own copy, taken when it started.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from testing import background

CHURN_S = 1.5


def spawn_until(stop_at: float) -> tuple[int, list[OSError], dict[str, str]]:
    """``true`` started again and again until ``stop_at``: how many, the errors, and the
    environment the last one got."""
    started, errors, env = 0, [], {}
    while time.monotonic() < stop_at:
        env = background.environ()
        try:
            subprocess.run(["true"], env=env, check=True)
        except OSError as exc:
            errors.append(exc)
        started += 1
    return started, errors, env


def test_a_jobs_processes_start_while_the_tests_change_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ERNIE_BEFORE_THE_JOB", "kept")
    stop_at = time.monotonic() + CHURN_S
    background.start("spawner", lambda: spawn_until(stop_at))
    round_ = 0
    while time.monotonic() < stop_at:  # new names each round: setenv grows and moves the array
        names = [f"ERNIE_CHURN_{round_}_{n}" for n in range(50)]
        for name in names:
            os.environ[name] = "x" * 10
        for name in names:
            del os.environ[name]
        round_ += 1
    started, errors, env = background.result("spawner", lambda: None, timeout_s=30)
    assert errors == [], f"{len(errors)} of {started} starts failed: {errors[0]}"
    assert started > 20 and round_ > 20, (started, round_)  # they did overlap
    assert env["ERNIE_BEFORE_THE_JOB"] == "kept"
    assert not [name for name in env if name.startswith("ERNIE_CHURN_")]
