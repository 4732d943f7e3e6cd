"""The GPU lock installs from wheels on any Linux x86-64 host with Python 3.11.

``requirements.txt`` is never installed here (no GPU), so pip resolves it as a dry run
for the image's platform (glibc up to Debian 12's 2.36): every pin must come as a wheel,
except six small pure-Python packages published only as source. It resolves the pins as
``scripts/setup.sh gpu`` installs them, exactly (``===``): ``==2.13.0`` also takes a local
``torch 2.13.0+cpu`` (this machine's wheels, the CPU image's index), which pip and uv
(setup.sh's installer; seen in its dry run here) both prefer. The dry run starts in the
background as the session begins, and a pass is remembered for the same lock on this
machine (``testing.locks``).
"""

from __future__ import annotations

import pytest

from testing import background
from testing.locks import gpu_lock_report

pytestmark = pytest.mark.network


def test_every_gpu_pin_is_pypis_own_wheel_for_linux_and_python_3_11() -> None:
    report = background.result("gpu lock", gpu_lock_report, timeout_s=900)
    errors = [line for line in report["stderr"].splitlines() if line.startswith("ERROR")]
    assert report["returncode"] == 0, "\n".join(errors) or report["stderr"][-2000:]
    installed = report["installed"]
    assert len(installed) == report["asked"] > 250
    assert all(item["download_info"]["url"].endswith(".whl") for item in installed)
    assert not [
        item["metadata"]["version"] for item in installed if "+" in item["metadata"]["version"]
    ]
