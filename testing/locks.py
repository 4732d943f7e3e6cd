"""The GPU lock's dry run: ``requirements.txt`` resolved by pip for the image's platform,
as ``scripts/setup.sh gpu`` installs it (exact pins, ``===``), without installing anything.

It asks PyPI about some 280 wheels (a minute or two): a pass is remembered on this machine
in a stamp keyed by the lock's hash, outside the repository, and a later session with the
same lock reads the stamp's report instead of asking again. A fresh machine asks.

Usage::

    report = gpu_lock_report()      # {"installed": [...], "stderr": "...", "returncode": 0}
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .background import environ, lowest_priority
from .servers import ROOT

__all__ = ["SOURCE_ONLY", "STAMPS", "gpu_lock_report", "pins"]

SOURCE_ONLY = {"asyncer", "chevron", "cuid", "lazify", "literalai", "syncer"}
GLIBC_MINORS = range(17, 37)  # manylinux_2_17 .. manylinux_2_36 (Debian 12)
LEGACY = ["manylinux2014", "manylinux2010", "manylinux1"]  # older names of 2_17, 2_12, 2_5
STAMPS = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ernie-chat"


def pins(lock: Path) -> list[str]:
    return [line for line in lock.read_text().splitlines() if "==" in line and line[0] != " "]


def _dry_run(wheels: list[str]) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="ernie-lock-"))
    (folder / "wheels.txt").write_text("\n".join(wheels) + "\n")
    names = [f"manylinux_2_{minor}" for minor in GLIBC_MINORS] + LEGACY
    platforms = [f"--platform={name}_x86_64" for name in names]
    command = [*lowest_priority(), sys.executable, "-m", "pip", "install", "--dry-run"]
    command += ["--no-deps", "--quiet", "--disable-pip-version-check", "--only-binary=:all:"]
    command += [f"--target={folder / 'x'}", "--python-version=3.11", "--implementation=cp"]
    command += ["--abi=cp311", "--abi=abi3", "--abi=none", *platforms]
    command += [f"--report={folder / 'report.json'}", "-r", str(folder / "wheels.txt")]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=600, check=False, env=environ()
    )
    report = folder / "report.json"
    installed = json.loads(report.read_text())["install"] if report.exists() else []
    return {"returncode": done.returncode, "stderr": done.stderr, "installed": installed}


def gpu_lock_report() -> dict[str, Any]:
    """The dry run's outcome for the lock as it is: the stamp of its last pass on this
    machine, or a new run (stamped when it passes)."""
    lock = ROOT / "requirements.txt"
    stamp = STAMPS / f"gpu-lock-{hashlib.sha256(lock.read_bytes()).hexdigest()[:16]}.json"
    if stamp.is_file():
        return dict(json.loads(stamp.read_text()))
    wheels = [p.replace("==", "===") for p in pins(lock) if p.split("==")[0] not in SOURCE_ONLY]
    outcome = _dry_run(wheels) | {"asked": len(wheels)}
    if outcome["returncode"] == 0:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps(outcome))
    return outcome
