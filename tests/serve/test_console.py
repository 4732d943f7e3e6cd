"""The console's split: the app's lines and unexpected warnings; everything in the file."""

from __future__ import annotations

import json
import logging
import logging.config
from pathlib import Path

import pytest

from serve.__main__ import main
from serve.console import EXPECTED, JsonFormatter, QuietFilter, vllm_config


def record(name: str, level: int, message: str) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, None, None)


def test_the_console_keeps_the_apps_lines_and_unexpected_warnings() -> None:
    quiet = QuietFilter()
    assert quiet.filter(record("engine.supervisor", logging.INFO, "engine ready in 3 s"))
    assert quiet.filter(record("serve.group", logging.INFO, "worker 1 started"))
    assert not quiet.filter(record("vllm.v1.engine.core", logging.INFO, "Initializing ..."))
    assert not quiet.filter(record("chainlit", logging.INFO, "Your app is available at ..."))
    assert quiet.filter(record("vllm.worker", logging.WARNING, "out of memory soon"))
    assert quiet.filter(record("chainlit", logging.ERROR, "a handler failed"))
    expected = f"libtcmalloc {EXPECTED[0]} ..."
    assert not quiet.filter(record("vllm.v1.worker.cpu_worker", logging.WARNING, expected))


def test_json_lines_for_log_collectors() -> None:
    line = JsonFormatter().format(record("engine.supervisor", logging.WARNING, "你好 1"))
    entry = json.loads(line)
    assert entry["level"] == "warning" and entry["logger"] == "engine.supervisor"
    assert entry["message"] == "你好 1" and entry["time"]


def test_vllms_processes_get_the_same_split(tmp_path: Path) -> None:
    log_file = tmp_path / "full.log"
    vllm = logging.getLogger("vllm")
    before = (list(vllm.handlers), vllm.propagate, vllm.level)
    logging.config.dictConfig(vllm_config("info", "json", log_file))
    try:
        logging.getLogger("vllm.engine").info("config dump")
        logging.getLogger("vllm.engine").warning("a real warning")
        lines = [json.loads(line) for line in log_file.read_text().splitlines()]
        assert [entry["message"] for entry in lines] == ["config dump", "a real warning"]
        console = next(h for h in vllm.handlers if not isinstance(h, logging.FileHandler))
        assert any(isinstance(f, QuietFilter) for f in console.filters)
        debug = vllm_config("debug", "text", log_file)
        assert "filters" not in debug["handlers"]["console"]
    finally:
        for handler in vllm.handlers:
            handler.close()
        vllm.handlers, vllm.propagate = before[0], before[1]
        vllm.setLevel(before[2])


def test_a_replys_own_line_goes_to_the_file_only() -> None:
    """One line a reply (cut at the length limit, its stats): under load, a flood."""
    quiet = QuietFilter()
    line = "request chat-1 length: 1024 tokens · 80 tokens/s"
    assert not quiet.filter(record("engine.replies", logging.INFO, line))
    assert quiet.filter(record("engine.replies", logging.WARNING, "a reply failed"))


def test_a_start_that_stops_says_why_in_the_log_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "ernie-chat.log"
    monkeypatch.setenv("ERNIE_LOG_FILE", str(log))
    monkeypatch.setenv("ERNIE_MODEL", str(tmp_path / "no-such-model"))
    for name, value in {"TQDM_DISABLE": "1", "TORCH_CPP_LOG_LEVEL": "ERROR"}.items():
        monkeypatch.setenv(name, value)  # the start sets them: put back after
    monkeypatch.setenv("VLLM_LOGGING_CONFIG_PATH", str(tmp_path / "vllm-logging.json"))
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        assert main(["--port", "1"]) == 2
    finally:
        for handler in root.handlers:
            if handler not in before:
                handler.close()
        root.handlers = before
    said = capsys.readouterr().err.strip().splitlines()
    assert said[-1].startswith("error: ERNIE_MODEL=") and "no such folder" in said[-1]
    logged = log.read_text(encoding="utf-8").splitlines()[-1]
    assert logged.endswith(f"ERROR serve: {said[-1].removeprefix('error: ')}"), logged
