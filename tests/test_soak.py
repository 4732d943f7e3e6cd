"""The soak script, short: chats held open against the real app, none failed or cut.

The full run (100 chats for 10 minutes) is ``python -m bench.soak``; its numbers are in
docs/benchmarks.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.soak import main

pytestmark = pytest.mark.engine


def test_a_short_soak_has_no_failed_or_truncated_reply(
    demo_model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in {
        "ERNIE_MODEL": str(demo_model),
        "ERNIE_KV_CACHE_GB": "0.5",
        "ERNIE_MAX_MODEL_LEN": "2048",
        "ERNIE_WARMUP": "false",
    }.items():
        monkeypatch.setenv(name, value)
    code = main(["--chats", "8", "--minutes", "0.3", "--reply-tokens", "32", "--think-s", "0.2"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["replies"] >= 16 and result["problems"] == []  # every chat went round twice+
    assert result["failed"] == 0 and result["truncated"] == 0
    assert result["memory_growth"] <= 0.10
    assert code == 0
