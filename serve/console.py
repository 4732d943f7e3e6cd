"""What the console shows: the app's own lines, and other programs' warnings and errors.

vLLM and Chainlit log their progress at INFO (config dumps, process starts, shutdown
steps): dozens of lines an operator must scroll past to find the app's. By default the
console gets the app's loggers at INFO and everyone's warnings and errors; every line of
every logger goes to the log file, whose path the first line names.
``ERNIE_LOG_LEVEL=debug`` shows everything on the console too; ``ERNIE_LOG_FORMAT=json``
writes one JSON object a line (time, level, logger, message) for log collectors.

vLLM configures its own loggers in each of its processes from the file that
``VLLM_LOGGING_CONFIG_PATH`` names: ``configure`` writes one with the same split, so the
engine's processes follow it (an operator's own file is left alone).

Usage::

    log_file = configure(settings.log_level, settings.log_format, settings.log_file)
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from settings.names import SettingsError, env_name

__all__ = [
    "APP_LOGGERS",
    "JsonFormatter",
    "QuietFilter",
    "configure",
    "to_log_file",
    "vllm_config",
]

APP_LOGGERS = ("app", "bench", "chat", "deploy", "engine", "serve")
# The app's loggers whose INFO lines go to the log file only: one a reply, under load a
# flood on the console (a reply cut at the length limit, its stats).
FILE_ONLY = ("engine.replies",)
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# vLLM's warnings about choices this app makes on purpose (no compilation on the CPU, no
# Triton there, the CPU allocator hints, token-id prompts: the engine API the app uses on
# vLLM 0.26 and 0.29 alike): true, expected, and nothing to act on.
EXPECTED = (
    "Passing raw prompts to InputProcessor is deprecated",
    "Triton is installed, but",
    "Enforce eager set",
    "Inductor compilation was disabled",
    "Model Runner V2 requires Triton",
    "is not found in LD_PRELOAD",
    "Failed to create oneDNN linear",
    "api_server_count more than 1; disabling stats logging",  # a group's workers: /metrics
    "Reset SSM cache type to float32",  # the CPU backend, for a model without SSM layers
)


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message (and the exception)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class QuietFilter(logging.Filter):
    """The console's choice: the app's lines (but one a reply), and other loggers'
    unexpected warnings."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name in FILE_ONLY and record.levelno < logging.WARNING:
            return False
        if record.name.split(".")[0] in APP_LOGGERS:
            return True
        if record.levelno < logging.WARNING:
            return False
        message = record.getMessage()
        return not any(expected in message for expected in EXPECTED)


def _formatter_config(fmt: str) -> dict[str, Any]:
    if fmt == "json":
        return {"()": f"{__name__}.JsonFormatter"}
    return {"format": TEXT_FORMAT}


def vllm_config(level: str, fmt: str, log_file: Path) -> dict[str, Any]:
    """vLLM's logging configuration (``logging.config.dictConfig``) with this split."""
    console: dict[str, Any] = {
        "class": "logging.StreamHandler",
        "formatter": "line",
        "stream": "ext://sys.stderr",
    }
    if level != "debug":
        console["filters"] = ["quiet"]
    to_file = {"class": "logging.FileHandler", "filename": str(log_file), "formatter": "line"}
    vllm = {"handlers": ["console", "file"], "level": level.upper(), "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"line": _formatter_config(fmt)},
        "filters": {"quiet": {"()": f"{__name__}.QuietFilter"}},
        "handlers": {"console": console, "file": to_file},
        "loggers": {"vllm": vllm},
    }


def to_log_file(text: str) -> None:
    """``text`` as an error line of the log file alone (the console said it already: a
    start that stops, in its own words)."""
    record = logging.LogRecord("serve", logging.ERROR, __file__, 0, text, None, None)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)


def configure(level: str, fmt: str, log_file: Path) -> Path:
    """Set this process's logging (and vLLM's, in the processes it starts); returns the
    log file's absolute path. Call it before vLLM is imported."""
    log_file = log_file.expanduser().resolve()
    try:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        to_file = logging.FileHandler(log_file, encoding="utf-8")
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise SettingsError(
            f"{env_name('log_file')}={str(log_file)!r}: cannot write there ({why}); "
            "give a file in a writable folder"
        ) from exc
    formatter = JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT)
    console = logging.StreamHandler()
    console.setFormatter(formatter)
    if level != "debug":
        console.addFilter(QuietFilter())
    to_file.setFormatter(formatter)
    logging.basicConfig(level=level.upper(), handlers=[console, to_file], force=True)
    if not os.environ.get("VLLM_LOGGING_CONFIG_PATH"):
        config = log_file.with_name(log_file.stem + "-vllm-logging.json")
        config.write_text(json.dumps(vllm_config(level, fmt, log_file)), encoding="utf-8")
        os.environ["VLLM_LOGGING_CONFIG_PATH"] = str(config)
    if level != "debug":  # bars that honour it (vLLM's is off: engine.engine_args)
        os.environ.setdefault("TQDM_DISABLE", "1")
        # C++ warnings (vLLM's CPU kernels' NUMA binding) go to stderr past logging.
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    return log_file
