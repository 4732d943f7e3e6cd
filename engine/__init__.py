"""The chat engine: settings, one in-process vLLM engine, prompts and clean reply streams.

The data path reads in one direction: settings -> engine -> prompt -> stream. This
package never imports Chainlit; ``app.py`` never imports vLLM.

Names are imported on first use: importing vLLM takes seconds, and ``python -m engine
check`` or a bad setting should answer without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compat import drop_blocking_sleep, guard_module_getattr
    from .core import ChatEngine, EngineState, EngineStatus, new_request_id
    from .errors import (
        EngineError,
        EngineFailedError,
        EngineNotReadyError,
        EngineRestartingError,
        GenerationError,
        LimitExceededError,
        MessageRefusedError,
        PromptTooLongError,
    )
    from .prompt import Turn, available_system_prompts
    from .sampling import ChatOptions
    from .settings import Settings, SettingsError, env_name, load_settings
    from .stream import ReplyEnd, ReplyStats, StreamEvent, TextChunk

_SOURCES = {
    "compat": ["drop_blocking_sleep", "guard_module_getattr"],
    "core": ["ChatEngine", "EngineState", "EngineStatus", "new_request_id"],
    "errors": [
        "EngineError",
        "EngineFailedError",
        "EngineNotReadyError",
        "EngineRestartingError",
        "GenerationError",
        "LimitExceededError",
        "MessageRefusedError",
        "PromptTooLongError",
    ],
    "prompt": ["Turn", "available_system_prompts"],
    "sampling": ["ChatOptions"],
    "settings": ["Settings", "SettingsError", "env_name", "load_settings"],
    "stream": ["ReplyEnd", "ReplyStats", "StreamEvent", "TextChunk"],
}
_MODULE_OF = {name: module for module, names in _SOURCES.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:  # AttributeError, as Python's protocol requires (cf. Chainlit#2499)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
