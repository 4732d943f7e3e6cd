"""Errors the engine raises to its callers.

    EngineError
     ├── EngineNotReadyError    the model is still loading (retry later)
     ├── EngineFailedError      the engine could not start, or died for good (not retryable)
     ├── EngineRestartingError  the engine died and a new one is being built (retry soon)
     ├── GenerationError        one reply failed; the engine keeps working (retryable)
     ├── PromptTooLongError     the newest message alone does not fit (user-fixable)
     ├── MessageRefusedError    the message is empty or over a set limit (user-fixable)
     ├── BackendStartError      the backend could not start (one line)
     └── BackendDeadError       the backend's engine died while answering

vLLM's and httpx's own exceptions are translated to these at one boundary, in each
backend (``engine.local``, ``engine.remote``), raised ``from`` the original so the log
keeps the cause.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "BackendDeadError",
    "BackendStartError",
    "EngineError",
    "EngineFailedError",
    "EngineNotReadyError",
    "EngineRestartingError",
    "GenerationError",
    "MessageRefusedError",
    "PromptTooLongError",
]


class EngineError(Exception):
    """Base of every error the engine raises."""


class EngineNotReadyError(EngineError):
    """The engine is still loading."""

    def __init__(self, elapsed_s: float) -> None:
        self.elapsed_s = elapsed_s
        super().__init__(f"the model is still loading ({elapsed_s:.0f} s so far)")


class EngineFailedError(EngineError):
    """The engine failed to start or died; ``reason`` is one line."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"the engine is not available: {reason}")


class EngineRestartingError(EngineError):
    """The engine died; a new one is being built. ``reason`` is one line."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"the engine is restarting: {reason}")


class GenerationError(EngineError):
    """One reply failed; the engine still works and the message can be sent again."""

    def __init__(self) -> None:
        super().__init__("the reply failed; please send the message again")


class PromptTooLongError(EngineError):
    """The newest message alone does not fit in the context window."""

    def __init__(self, prompt_tokens: int, limit: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.limit = limit
        super().__init__(
            f"the message is {prompt_tokens} tokens with the system prompt, "
            f"but at most {limit} fit; shorten it"
        )


RefusalReason = Literal["empty", "too_many_chars", "too_many_tokens"]


class MessageRefusedError(EngineError):
    """The message is empty, or longer than a limit the settings set."""

    def __init__(self, reason: RefusalReason, size: int, limit: int) -> None:
        self.reason = reason
        self.size = size
        self.limit = limit
        super().__init__(f"message refused ({reason}): {size}, limit {limit}")


class BackendStartError(EngineError):
    """The backend could not start; the message is one line with the fix."""


class BackendDeadError(EngineError):
    """The backend's engine died while answering; ``cause`` says how, when known."""

    def __init__(self, cause: str | None) -> None:
        self.cause = cause
        super().__init__(f"the engine died: {cause or 'unknown cause'}")
