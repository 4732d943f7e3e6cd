"""The start-up checks (``testing.load_checks``), started when the session collected."""

from __future__ import annotations

import subprocess

import pytest

from testing import background
from testing.load_checks import run_load_checks


@pytest.fixture(scope="session")
def load_checks() -> dict[str, subprocess.CompletedProcess[str]]:
    return dict(background.result("load checks", run_load_checks, timeout_s=1200))
