"""Chat history: where signed-in users' chats are kept, and how a chat is resumed.

The data layer is Chainlit's SQLAlchemy layer with every id checked (``data_layer``); its
tables are created by ``schema``. A resumed chat becomes the model's history again through
the handler ``resume``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import chainlit as cl
from chainlit.types import ThreadDict

from .data_layer import SafeDataLayer

__all__ = ["register"]


def register(url: str, resume: Callable[[ThreadDict], Awaitable[None]]) -> str:
    """Keep chats in the database at ``url``, and resume them with ``resume``."""

    @cl.data_layer
    def chat_history() -> SafeDataLayer:
        return SafeDataLayer(conninfo=url)

    cl.on_chat_resume(resume)
    return url
