"""The history turned on: Chainlit's data layer, the resume handler, and its refusals
as answers (400, 403) instead of a 500 (raised, or wrapped in Chainlit's own 500)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import chainlit as cl
from chainlit.types import ThreadDict
from fastapi import HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, Response

from ..chainlit_door import data_layer, server_app
from .data_layer import HistoryAccessError, HistoryIdError, SafeDataLayer

__all__ = ["register", "step_stored"]


async def _refused(request: Request, exc: Exception) -> JSONResponse:
    """A route the data layer refused: 400 for an id that is not one, 403 for another
    user's chat (Chainlit's routes let them out as a 500 and a traceback)."""
    status = 403 if isinstance(exc, HistoryAccessError) else 400
    return JSONResponse({"detail": str(exc)}, status_code=status)


async def _wrapped(request: Request, exc: Exception) -> Response:
    """Chainlit's feedback routes turn any error into a 500: the data layer's refusal
    under it is answered as itself (403, 400)."""
    cause = exc.__cause__
    if isinstance(cause, (HistoryAccessError, HistoryIdError)):
        return await _refused(request, cause)
    assert isinstance(exc, HTTPException)
    return await http_exception_handler(request, exc)


async def step_stored(step_id: str) -> bool:
    """Whether the history holds a step of this id (admission: a new message's id)."""
    layer = data_layer()
    return isinstance(layer, SafeDataLayer) and await layer.step_stored(step_id)


def register(url: str, resume: Callable[[ThreadDict], Awaitable[None]]) -> str:
    """Keep chats in the database at ``url``, and resume them with ``resume``."""

    @cl.data_layer
    def chat_history() -> SafeDataLayer:
        return SafeDataLayer(conninfo=url)

    cl.on_chat_resume(resume)
    server_app.add_exception_handler(HistoryIdError, _refused)
    server_app.add_exception_handler(HistoryAccessError, _refused)
    server_app.add_exception_handler(HTTPException, _wrapped)
    return url
