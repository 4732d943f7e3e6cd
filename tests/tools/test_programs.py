"""A test that needs a program of the system skips with the package to install where it is
missing, and fails instead in the full run (``scripts/test.sh``), never skipped there."""

from __future__ import annotations

import pytest

from testing.programs import ALL, needs


def test_a_missing_program_skips_the_fast_loop_and_fails_the_full_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv(ALL, raising=False)
    mark = needs("no-such-program-here")
    assert mark.args == (True,) and "apt-get install no-such-program-here" in mark.kwargs["reason"]
    monkeypatch.setenv(ALL, "all")
    assert needs("no-such-program-here").args == (False,)  # the test runs, and fails alone


def test_a_program_that_is_there_runs_its_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALL, raising=False)
    assert needs("sh").args == (False,)
