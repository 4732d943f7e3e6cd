"""The words a user reads for each error the app expects, in the chat's language.

Usage::

    error_text(exc, chat_strings())   # the text, or None for an error no one expected
"""

from __future__ import annotations

import math

from engine import (
    EngineFailedError,
    EngineRestartingError,
    GenerationError,
    MessageRefusedError,
    PromptTooLongError,
)

from ..errors import LimitExceededError, MalformedMessageError, PanelValueError
from .i18n import Strings

__all__ = ["error_text"]


def error_text(exc: Exception, t: Strings) -> str | None:
    """Words for the user; None for an error the app did not expect (``chat.ui.failures``
    reports it, and the user gets its reference)."""
    if isinstance(exc, LimitExceededError):
        if exc.limit == "busy":
            return t("busy")
        if exc.limit == "daily_tokens":
            hours = max(1, math.ceil((exc.retry_after_s or 0) / 3600))
            return t("limit_daily_tokens", limit=exc.value, hours=hours)
        if exc.retry_after_s is None:
            return t("limit_replies", limit=exc.value)
        seconds = max(1, math.ceil(exc.retry_after_s))
        return t("limit_per_minute", limit=exc.value, seconds=seconds)
    if isinstance(exc, MessageRefusedError):
        return t(f"refused_{exc.reason}", size=exc.size, limit=exc.limit)
    if isinstance(exc, PromptTooLongError):
        return t("too_long", tokens=exc.prompt_tokens, limit=exc.limit)
    if isinstance(exc, EngineRestartingError):
        return t("restarting")
    if isinstance(exc, EngineFailedError):
        return t("failed", reason=exc.reason)
    if isinstance(exc, GenerationError):
        return t("generation_failed")
    if isinstance(exc, PanelValueError):
        if exc.name is None:
            return t("settings_unknown")
        return t("settings_refused", name=t(exc.name))
    if isinstance(exc, MalformedMessageError):
        return t("refused_malformed")
    return None
