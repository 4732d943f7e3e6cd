"""The history turned on: Chainlit's data layer, the resume handler, and its refusals
as answers (400, 403) instead of a 500."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import chainlit as cl
from chainlit.server import app
from chainlit.types import ThreadDict
from fastapi import Request
from fastapi.responses import JSONResponse

from .data_layer import HistoryAccessError, HistoryIdError, SafeDataLayer

__all__ = ["register"]


async def _refused(request: Request, exc: Exception) -> JSONResponse:
    """A route the data layer refused: 400 for an id that is not one, 403 for another
    user's chat (Chainlit's routes let them out as a 500 and a traceback)."""
    status = 403 if isinstance(exc, HistoryAccessError) else 400
    return JSONResponse({"detail": str(exc)}, status_code=status)


def register(url: str, resume: Callable[[ThreadDict], Awaitable[None]]) -> str:
    """Keep chats in the database at ``url``, and resume them with ``resume``."""

    @cl.data_layer
    def chat_history() -> SafeDataLayer:
        return SafeDataLayer(conninfo=url)

    cl.on_chat_resume(resume)
    app.add_exception_handler(HistoryIdError, _refused)
    app.add_exception_handler(HistoryAccessError, _refused)
    return url
