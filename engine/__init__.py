"""The model side: a backend that runs the model, kept alive, and the reply path on it.

The data path reads one way: settings (``settings``) -> engine -> web app (``chat``).
This package never imports Chainlit. Its public names are below; the modules behind
them are its own business (``engine.backend`` is the seam for new backends;
``engine.client`` the protocol the web app depends on, ``engine.mock`` its fake).

Names are imported on first use: importing vLLM takes seconds, and ``python -m engine
check`` or a bad setting should answer without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import Backend
    from .client import ChatClient, ModelFacts
    from .core_errors import exit_reason
    from .download import Download, DownloadError, fetch_model
    from .errors import (
        BackendDeadError,
        BackendStartError,
        EngineError,
        EngineFailedError,
        EngineNotReadyError,
        EngineRestartingError,
        GenerationError,
        MessageRefusedError,
        PromptTooLongError,
    )
    from .mock import MockEngine, MockModel, MockRequest
    from .model.system_prompts import available_system_prompts
    from .plan.plan import Plan, ReplySlots, reply_slots
    from .plan.preflight import preflight
    from .prompt import Turn
    from .replies import ChatEngine, new_request_id
    from .sampling import ChatOptions
    from .shared_core import Attachment, SharedCore, launch_shared_core
    from .stream import EngineTimes, ReplyEnd, ReplyStats, StreamEvent, TextChunk
    from .supervisor import EngineState, EngineStatus

_SOURCES = {
    "backend": ["Backend"],
    "client": ["ChatClient", "ModelFacts"],
    "core_errors": ["exit_reason"],
    "download": ["Download", "DownloadError", "fetch_model"],
    "errors": [
        "BackendDeadError",
        "BackendStartError",
        "EngineError",
        "EngineFailedError",
        "EngineNotReadyError",
        "EngineRestartingError",
        "GenerationError",
        "MessageRefusedError",
        "PromptTooLongError",
    ],
    "model.system_prompts": ["available_system_prompts"],
    "mock": ["MockEngine", "MockModel", "MockRequest"],
    "prompt": ["Turn"],
    "replies": ["ChatEngine", "new_request_id"],
    "sampling": ["ChatOptions"],
    "shared_core": ["Attachment", "SharedCore", "launch_shared_core"],
    "stream": ["EngineTimes", "ReplyEnd", "ReplyStats", "StreamEvent", "TextChunk"],
    "supervisor": ["EngineState", "EngineStatus"],
    "plan.plan": ["Plan", "ReplySlots", "reply_slots"],
    "plan.preflight": ["preflight"],
}
_MODULE_OF = {name: module for module, names in _SOURCES.items() for name in names}

__all__ = [
    "Attachment",
    "Backend",
    "BackendDeadError",
    "BackendStartError",
    "ChatClient",
    "ChatEngine",
    "ChatOptions",
    "Download",
    "DownloadError",
    "EngineError",
    "EngineFailedError",
    "EngineNotReadyError",
    "EngineRestartingError",
    "EngineState",
    "EngineStatus",
    "EngineTimes",
    "GenerationError",
    "MessageRefusedError",
    "MockEngine",
    "MockModel",
    "MockRequest",
    "ModelFacts",
    "Plan",
    "PromptTooLongError",
    "ReplyEnd",
    "ReplySlots",
    "ReplyStats",
    "SharedCore",
    "StreamEvent",
    "TextChunk",
    "Turn",
    "available_system_prompts",
    "exit_reason",
    "fetch_model",
    "launch_shared_core",
    "new_request_id",
    "preflight",
    "reply_slots",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:  # AttributeError, as Python's protocol requires (cf. Chainlit#2499)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
