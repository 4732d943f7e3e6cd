"""``python -m engine chat`` and ``demo-model`` as an operator runs them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine import cli
from engine.cli import main
from testing.engines import RunningEngine
from testing.servers import ROOT


def run_engine(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ERNIE_")}
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        env={**clean, "PYTHONPATH": str(ROOT), **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_demo_model_command_writes_a_loadable_model(tmp_path: Path) -> None:
    assert main(["demo-model", str(tmp_path / "m")]) == 0
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["architectures"] == ["Ernie4_5ForCausalLM"]
    assert config["head_dim"] == 64
    assert (tmp_path / "m" / "tokenizer.json").is_file()
    assert "<|end_of_sentence|>" in (tmp_path / "m" / "chat_template.jinja").read_text()


@pytest.mark.engine
async def test_chat_prints_a_reply_and_a_stats_line(
    running: RunningEngine, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command's output, on the session's engine (building one from the settings is
    ``check --load``'s test; the command's own start is tested below): the reply alone on
    stdout, the stats line on stderr."""
    await cli.chat_to_terminal(running.engine, "你好")
    out, err = capsys.readouterr()
    assert out.strip(), "no reply text on stdout"
    assert "\ufffd" not in out
    stats = re.search(r"^\[(stop|length)\] (\d+) tokens · first token \d+ ms", err, re.M)
    assert stats, err[-3000:]
    assert 1 <= int(stats.group(2)) <= running.engine.settings.max_tokens


def test_chat_with_a_bad_setting_exits_2_before_loading(tmp_path: Path) -> None:
    result = run_engine(["chat", "你好"], {"ERNIE_TOP_P": "2"}, tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: ERNIE_TOP_P='2': input should be less than or equal to 1 (unset it for the default)"
    ]
