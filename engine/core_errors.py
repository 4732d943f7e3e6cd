"""vLLM's errors from its engine processes, read back in this one.

vLLM builds its engine in other processes; when they fail, this process only hears
"Engine core initialization failed. See root cause above". ``CoreErrorLog`` has vLLM's
loggers, in every process, also write their errors to a file, so the root cause can be
read back (and ``engine.vllm_door.failures`` can translate it into the setting to change).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
from pathlib import Path
from typing import Any

from engine.vllm_door.internals import ended_processes as vllm_ended_processes
from engine.vllm_door.internals import logging_config

__all__ = ["CoreErrorLog", "ended_processes", "exit_reason"]

_EXCEPTION_LINE = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception))(?:: (.+))?$")
_FRAME_LINE = re.compile(r'^File "(?:.*/)?([^/"]+)", line (\d+)')


class CoreErrorLog:
    """vLLM's errors from every process, in a file this process can read.

    Spawned engine processes read ``VLLM_LOGGING_CONFIG_PATH`` when they import vLLM
    (vLLM's own logging config plus a file handler); forked ones inherit the handler
    added here. A ``VLLM_LOGGING_CONFIG_PATH`` already set (the console's, or an
    operator's) is extended with the file, not replaced.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / "vllm-errors.log"
        self._config = folder / "vllm-logging.json"
        self._handler: logging.Handler | None = None
        self._env_set = False
        self._previous: str | None = None

    def __enter__(self) -> CoreErrorLog:
        default = logging_config()
        if default is None:  # VLLM_CONFIGURE_LOGGING=0: vLLM logs as the app says
            return self
        self._previous = os.environ.get("VLLM_LOGGING_CONFIG_PATH")
        if self._previous:  # the console's (serve.console) or an operator's: extended
            config = json.loads(Path(self._previous).read_text(encoding="utf-8"))
        else:
            config = default
        config.setdefault("formatters", {})["errors_only"] = {"format": "%(message)s"}
        config.setdefault("handlers", {})["errors_file"] = {
            "class": "logging.FileHandler",
            "filename": str(self.path),
            "level": "ERROR",
            "formatter": "errors_only",
        }
        vllm = config.setdefault("loggers", {}).setdefault("vllm", {})
        vllm["handlers"] = [*vllm.get("handlers", []), "errors_file"]
        self._config.write_text(json.dumps(config), encoding="utf-8")
        os.environ["VLLM_LOGGING_CONFIG_PATH"] = str(self._config)
        self._env_set = True
        self._handler = logging.FileHandler(self.path, encoding="utf-8")
        self._handler.setLevel(logging.ERROR)
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        logging.getLogger("vllm").addHandler(self._handler)
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Stop handing the config to new processes (running ones keep writing)."""
        if self._env_set:
            if self._previous:
                os.environ["VLLM_LOGGING_CONFIG_PATH"] = self._previous
            else:
                os.environ.pop("VLLM_LOGGING_CONFIG_PATH", None)
            self._env_set = False

    def close(self) -> None:
        if self._handler is not None:
            logging.getLogger("vllm").removeHandler(self._handler)
            self._handler.close()
            self._handler = None

    def size(self) -> int:
        return self.path.stat().st_size if self.path.is_file() else 0

    def root_cause(self, since: int = 0) -> str | None:
        """The first exception vLLM logged (after byte ``since``), as ``Type: message``:
        the processes log in the order they fail, so the first is the cause and later
        ones ("WorkerProc initialization failed", ...) are its echoes."""
        if not self.path.is_file():
            return None
        with self.path.open("rb") as log:
            log.seek(since)
            text = log.read().decode("utf-8", errors="replace")
        where = ""
        lines = [line.strip() for line in text.splitlines()]
        for number, line in enumerate(lines):
            if frame := _FRAME_LINE.match(line):
                code = lines[number + 1] if number + 1 < len(lines) else ""
                where = f"at {frame.group(1)}:{frame.group(2)}: {code}"
            elif match := _EXCEPTION_LINE.match(line):
                return f"{match.group(1)}: {match.group(2) or where}"  # a bare assert: where
        return None


def ended_processes(llm: Any) -> str | None:
    """How vLLM's engine processes ended ("EngineCore_DP0 killed by SIGKILL"), as far as
    vLLM's process manager knows; None when it does not say (other vLLM versions)."""
    codes = vllm_ended_processes(llm) or {}
    return ", ".join(f"{name} {exit_reason(code)}" for name, code in codes.items()) or None


def exit_reason(exit_code: int) -> str:
    """A process's exit code in words ("killed by SIGKILL", "exited with code 1")."""
    if exit_code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-exit_code).name}"
        return f"killed by signal {-exit_code}"
    return f"exited with code {exit_code}"
