"""One line that tells an operator why the engine did not start, and what to do.

vLLM builds its engine in another process; when that fails, the exception this process
sees only says "Engine core initialization failed. See root cause above". ``CoreErrorLog``
has vLLM's loggers, in every process, also write their errors to a file, so the root
cause can be read back and translated into the setting to change, with numbers.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import math
import os
import re
import signal
from pathlib import Path
from typing import Any

from .settings import Settings, env_name

__all__ = [
    "CoreErrorLog",
    "describe_failure",
    "ended_processes",
    "hub_unreachable",
    "kv_gib_that_fits",
    "share_that_fits",
]

MAX_LINE = 300
GiB = 1 << 30
_HUB_SIGNS = (
    "couldn't connect",
    "connection",
    "offline",
    "not a valid model identifier",
    "can't load tokenizer",
    "localentrynotfound",
    "repository not found",
)
_EXCEPTION_LINE = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception))(?:: (.+))?$")
_FRAME_LINE = re.compile(r'^File "(?:.*/)?([^/"]+)", line (\d+)')
_NUMBER = r"(-?[\d.]+)"
_KV_TOO_SMALL = re.compile(
    rf"max seq len \((\d+)\), \({_NUMBER} GiB KV cache is needed, which is larger than the "
    rf"available KV cache memory \({_NUMBER} GiB\)\.(?: Based on the available memory, the "
    r"estimated maximum model length is (\d+)\.)?"
)
_NOT_FREE = re.compile(
    rf"\({_NUMBER}/{_NUMBER} GiB\) on startup is less than desired (?:GPU|CPU) memory "
    rf"utilization \({_NUMBER}, {_NUMBER} GiB\)"
)
_KV_NOT_FREE = re.compile(
    rf"\({_NUMBER}/{_NUMBER} GiB\) on kv cache allocation is less than requested memory "
    rf"for kv \({_NUMBER}(?:/{_NUMBER})? GiB\)"
)
_NO_CACHE_MEMORY = "No available memory for the cache blocks"
_OUT_OF_MEMORY = re.compile(r"out of memory|OutOfMemoryError", re.IGNORECASE)


class CoreErrorLog:
    """vLLM's errors from every process, in a file this process can read.

    Spawned engine processes read ``VLLM_LOGGING_CONFIG_PATH`` when they import vLLM
    (vLLM's own logging config plus a file handler); forked ones inherit the handler
    added here. An operator's own ``VLLM_LOGGING_CONFIG_PATH`` is left alone.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / "vllm-errors.log"
        self._config = folder / "vllm-logging.json"
        self._handler: logging.Handler | None = None
        self._env_set = False

    def __enter__(self) -> CoreErrorLog:
        if os.environ.get("VLLM_LOGGING_CONFIG_PATH"):
            return self
        from vllm import envs
        from vllm.logger import DEFAULT_LOGGING_CONFIG

        if not envs.VLLM_CONFIGURE_LOGGING:
            return self
        config: dict[str, Any] = copy.deepcopy(DEFAULT_LOGGING_CONFIG)
        config["formatters"]["errors_only"] = {"format": "%(message)s"}
        config["handlers"]["errors_file"] = {
            "class": "logging.FileHandler",
            "filename": str(self.path),
            "level": "ERROR",
            "formatter": "errors_only",
        }
        config["loggers"]["vllm"]["handlers"] = [
            *config["loggers"]["vllm"]["handlers"],
            "errors_file",
        ]
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
    core = getattr(llm, "engine_core", None)
    manager = getattr(getattr(core, "resources", None), "engine_manager", None)
    try:
        codes: dict[str, int] = manager.finished_procs()  # type: ignore[union-attr]
    except Exception:  # an internal API: best effort only
        return None
    return ", ".join(f"{name} {_ending(code)}" for name, code in codes.items()) or None


def _ending(exit_code: int) -> str:
    if exit_code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-exit_code).name}"
        return f"killed by signal {-exit_code}"
    return f"exited with code {exit_code}"


def hub_unreachable(settings: Settings) -> str:
    return (
        f"{env_name('model')}={settings.model!r}: not a local folder, and the hub cannot be "
        f"reached; set {env_name('model')} to a local folder with the model, or HF_ENDPOINT "
        "to a hub mirror, or VLLM_USE_MODELSCOPE=true for ModelScope"
    )


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _is_hub_failure(exc: BaseException) -> bool:
    for item in _chain(exc):
        kind = type(item).__module__ + type(item).__name__
        text = (kind + " " + str(item)).lower()
        if "huggingface_hub" in kind or any(sign in text for sign in _HUB_SIGNS):
            return True
    return False


FREE_MARGIN = 0.95  # a suggested memory share leaves this much of what is free
KV_FREE_MARGIN = 0.8  # a suggested KV cache size leaves room for the engine beside it


def share_that_fits(free: float, total: float) -> float:
    """The largest memory share (two decimals) that fits in what is free."""
    return math.floor(free / total * FREE_MARGIN * 100) / 100


def kv_gib_that_fits(free_gib: float) -> float:
    """The largest KV cache size (GiB, one decimal) to suggest when ``free_gib`` is free."""
    return math.floor(free_gib * KV_FREE_MARGIN * 10) / 10


def _translate(cause: str, settings: Settings, share: float) -> str | None:
    """The setting to change for a vLLM start-up failure we know, with numbers; else None."""
    share_name = env_name("gpu_memory_utilization")
    if match := _KV_TOO_SMALL.search(cause):
        length, needed, available, estimate = match.groups()
        fix = (
            f"use at most {estimate} (the most that fits)"
            if estimate
            else f"raise {share_name} or {env_name('kv_cache_gb')}"
        )
        return (
            f"{env_name('max_model_len')}={int(length)}: one request of this length needs "
            f"{needed} GiB of KV cache, but {available} GiB is left for it at {share_name}="
            f"{share}; {fix}, or give vLLM more memory"
        )
    if _NO_CACHE_MEMORY in cause:
        return (
            f"{share_name}={share}: the weights and activations take all of it, nothing is "
            f"left for the KV cache; raise it, for example to {min(0.95, round(share + 0.1, 2))}"
        )
    if match := _NOT_FREE.search(cause):
        free, total, _, wanted = map(float, match.groups())
        return (
            f"{share_name}={share}: {wanted} GiB wanted but only {free} of {total} GiB is "
            f"free; use {share_that_fits(free, total)}, or stop what else uses the memory"
        )
    if match := _KV_NOT_FREE.search(cause):
        free, total, kv = map(float, match.groups()[:3])
        if settings.kv_cache_gb is not None:
            return (
                f"{env_name('kv_cache_gb')}={settings.kv_cache_gb}: only {free} GiB is free; "
                f"use at most {kv_gib_that_fits(free)}"
            )
        requested = float(match.group(4) or share * total)
        own = requested - kv  # what the engine process took before its KV cache
        wanted = math.ceil((own + 1) / total * 100) / 100  # room for 1 GiB of KV cache
        return (
            f"{share_name}={share}: the engine itself takes {own:.1f} of the "
            f"{requested:.1f} GiB, leaving no KV cache; use {wanted} or more, or set "
            f"{env_name('kv_cache_gb')}"
        )
    if _OUT_OF_MEMORY.search(cause):
        tp = settings.tensor_parallel_size
        return (
            f"out of memory while loading {settings.model!r} ({cause[:120]}); spread it over "
            f"more GPUs ({env_name('tensor_parallel_size')}={tp * 2}), use a smaller "
            f"{env_name('dtype')}, or stop what else uses the GPU"
        )
    return None


def describe_failure(
    exc: BaseException, settings: Settings, *, share: float, root_cause: str | None = None
) -> str:
    """The reason in one line: what to change, with numbers, when we know the failure."""
    if _is_hub_failure(exc):
        return hub_unreachable(settings)
    cause = root_cause or _first_line(exc)
    for text in (cause, *(_first_line(item) for item in _chain(exc))):
        translated = _translate(text, settings, share)
        if translated:
            return translated[:MAX_LINE]
    return cause[:MAX_LINE]
