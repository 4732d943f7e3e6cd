"""The test environment is the app's too: the suite's own ``bash scripts/start.sh``
(``testing.load_checks``; no kind, so ``cpu`` on this machine) installs nothing into the
environment the suite runs from. On a fresh cache it reinstalled the CPU lock there while
the suite's servers imported vLLM: ``No module named 'vllm.platforms'``, 75 errors.

``scripts/setup.sh`` runs here in a copy of the repository's set-up files, with a cache
of its own, and a stand-in interpreter that fails if anything is installed (so a broken
set-up can install nothing into this machine's environments).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from testing.servers import ROOT

FAILING_PYTHON = "#!/bin/sh\necho 'an install ran' >&2\nexit 1\n"


def _lock_hash(path: Path) -> str:
    out = subprocess.check_output(["sha256sum", str(path)], text=True)
    return out[:16]


def _checkout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the set-up files, and a cache whose test environment is installed
    (its stamp) with an interpreter that fails at any install."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", repo / "scripts")
    shutil.copytree(ROOT / "requirements", repo / "requirements")
    cache = tmp_path / "cache"
    venv = cache / "ernie-chat" / f"venv-test-{_lock_hash(repo / 'requirements' / 'test.txt')}"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(FAILING_PYTHON)
    python.chmod(0o755)
    (venv / f".installed-test-{_lock_hash(repo / 'requirements' / 'test.txt')}").touch()
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop("SETUP_KIND", None)
    return repo, env


def _setup(repo: Path, env: dict[str, str], *kind: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "scripts/setup.sh", *kind],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_apps_setup_installs_nothing_into_the_test_environment(tmp_path: Path) -> None:
    repo, env = _checkout(tmp_path)
    test = _setup(repo, env, "test")
    assert test.returncode == 0 and "setup: .venv ready (test)" in test.stdout, test
    assert (repo / ".venv").is_symlink()
    for kind in (("cpu",), ()):  # start.sh names no kind: cpu where no GPU answers
        app = _setup(repo, env | {"PATH": "/usr/bin:/bin"}, *kind)
        assert app.returncode == 0, app.stderr
        assert "installing" not in app.stdout and "an install ran" not in app.stderr
        assert app.stdout.strip() == "setup: .venv ready (cpu)"


def test_two_test_setups_at_once_both_end_ready(tmp_path: Path) -> None:
    """Two checkouts' first runs on one cache: one waits for the other (a lock)."""
    repo, env = _checkout(tmp_path)
    other = tmp_path / "other"
    shutil.copytree(repo, other)
    runs = [
        subprocess.Popen(
            ["bash", "scripts/setup.sh", "test"],
            cwd=where,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for where in (repo, other)
    ]
    outs = [run.communicate(timeout=60) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outs
    assert all(out.strip().endswith("setup: .venv ready (test)") for out, _ in outs)
    assert (repo / ".venv").resolve() == (other / ".venv").resolve()
    stamps = sorted(p.name for p in (repo / ".venv").resolve().glob(".installed-*"))
    assert [s.split("-")[1] for s in stamps] == ["cpu", "test"]
