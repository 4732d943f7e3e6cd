"""The web app's own errors, beside the engine's (``engine.errors``): ``chat.ui.render`` has
the words for each; what no one expected is reported by ``chat.ui.failures``."""

from __future__ import annotations

__all__ = ["MalformedMessageError"]


class MalformedMessageError(ValueError):
    """The event is not a chat message as the page sends one (``chat.access.admission``)."""
