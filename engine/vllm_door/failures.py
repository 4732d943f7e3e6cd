"""One line that tells an operator why the engine did not start, and what to do.

vLLM builds its engine in another process; when that fails, the exception this process
sees only says "Engine core initialization failed. See root cause above". The engine's
``CoreErrorLog`` reads the root cause back from vLLM's processes; ``describe_failure``
translates it into the setting to change, with numbers.
"""

from __future__ import annotations

import math
import re

from engine.model.files import hub_unreachable
from engine.model.memory import kv_gib_that_fits, share_that_fits
from engine.vllm_door.internals import KV_NOT_FREE, KV_TOO_SMALL, NO_CACHE_MEMORY, NOT_FREE
from settings.settings import Settings, env_name

__all__ = ["describe_failure"]

MAX_LINE = 300
_HUB_SIGNS = (
    "couldn't connect",
    "connection",
    "offline",
    "not a valid model identifier",
    "can't load tokenizer",
    "localentrynotfound",
    "repository not found",
)
_OUT_OF_MEMORY = re.compile(r"out of memory|OutOfMemoryError", re.IGNORECASE)


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


def _translate(cause: str, settings: Settings, share: float) -> str | None:
    """The setting to change for a vLLM start-up failure we know, with numbers; else None."""
    share_name = env_name("gpu_memory_utilization")
    if match := KV_TOO_SMALL.search(cause):
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
    if NO_CACHE_MEMORY in cause:
        return (
            f"{share_name}={share}: the weights and activations take all of it, nothing is "
            f"left for the KV cache; raise it, for example to {min(0.95, round(share + 0.1, 2))}"
        )
    if match := NOT_FREE.search(cause):
        free, total, _, wanted = map(float, match.groups())
        return (
            f"{share_name}={share}: {wanted} GiB wanted but only {free} of {total} GiB is "
            f"free; use {share_that_fits(free, total)}, or stop what else uses the memory"
        )
    if match := KV_NOT_FREE.search(cause):
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
