"""The web app's own errors that its rooms share, beside the engine's (``engine.errors``):
``chat.words`` has the words for each; what no one expected is reported by
``chat.ui.failures``."""

from __future__ import annotations

from typing import Literal

__all__ = ["LimitExceededError", "MalformedMessageError", "PanelValueError"]


class MalformedMessageError(ValueError):
    """The event is not a chat message as the page sends one (``chat.access.admission``)."""


class LimitExceededError(Exception):
    """The user is over a per-user limit, or the line is full (``busy``); ``retry_after_s``
    when waiting helps."""

    def __init__(
        self,
        limit: Literal["replies", "per_minute", "busy", "daily_tokens"],
        value: int,
        *,
        retry_after_s: float | None,
    ) -> None:
        self.limit = limit
        self.value = value
        self.retry_after_s = retry_after_s
        super().__init__(f"over the limit {limit}={value}")


class PanelValueError(ValueError):
    """A value the panel cannot send: a client sent it (``name`` says which; None: a
    setting the panel does not have)."""

    def __init__(self, name: str | None) -> None:
        self.name = name
        super().__init__(f"the settings panel cannot send this {name or 'setting'}")
