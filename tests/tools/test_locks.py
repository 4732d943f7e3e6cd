"""The GPU lock installs from wheels on any Linux x86-64 host with Python 3.11.

``requirements.txt`` is never installed here (no GPU), so pip resolves it as a dry run
for the image's platform (glibc up to Debian 12's 2.36): every pin must come as a wheel,
except six small pure-Python packages published only as source. It resolves the pins as
``scripts/setup.sh gpu`` installs them, exactly (``===``): ``==2.13.0`` also takes a local
``torch 2.13.0+cpu`` (this machine's wheels, the CPU image's index), which pip and uv
(setup.sh's installer; seen in its dry run here) both prefer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testing.servers import ROOT

pytestmark = pytest.mark.network

SOURCE_ONLY = {"asyncer", "chevron", "cuid", "lazify", "literalai", "syncer"}
GLIBC_MINORS = range(17, 37)  # manylinux_2_17 .. manylinux_2_36 (Debian 12)
LEGACY = ["manylinux2014", "manylinux2010", "manylinux1"]  # older names of 2_17, 2_12, 2_5


def pins(lock: Path) -> list[str]:
    return [line for line in lock.read_text().splitlines() if "==" in line and line[0] != " "]


def test_every_gpu_pin_is_pypis_own_wheel_for_linux_and_python_3_11(tmp_path: Path) -> None:
    lock = pins(ROOT / "requirements.txt")
    wheels = [pin.replace("==", "===") for pin in lock if pin.split("==")[0] not in SOURCE_ONLY]
    (tmp_path / "wheels.txt").write_text("\n".join(wheels) + "\n")
    names = [f"manylinux_2_{minor}" for minor in GLIBC_MINORS] + LEGACY
    platforms = [f"--platform={name}_x86_64" for name in names]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--quiet",
         "--disable-pip-version-check", "--only-binary=:all:", f"--target={tmp_path / 'x'}",
         "--python-version=3.11", "--implementation=cp", "--abi=cp311", "--abi=abi3",
         "--abi=none", *platforms, f"--report={tmp_path / 'report.json'}",
         "-r", str(tmp_path / "wheels.txt")],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
    assert done.returncode == 0, "\n".join(errors) or done.stderr[-2000:]
    installed = json.loads((tmp_path / "report.json").read_text())["install"]
    assert len(installed) == len(wheels) > 250
    assert all(item["download_info"]["url"].endswith(".whl") for item in installed)
    assert not [
        item["metadata"]["version"] for item in installed if "+" in item["metadata"]["version"]
    ]
