"""Chainlit's parts the app reads beyond its ``cl`` API: the project's config, the server's
ASGI app and socket path, the socket session's class, the current task's session and its
emitter, and the sign-in's token helpers. Outside this door the app imports of Chainlit
only ``chainlit`` itself (``cl``), ``chainlit.types``, ``chainlit.input_widget``,
``chainlit.message`` and ``chainlit.data.sql_alchemy`` (the data layer it extends):
``tests/test_layout.py`` holds that allow-list.
"""

from __future__ import annotations

from typing import Any

from chainlit.auth import ensure_jwt_secret, get_current_user, get_token_from_cookies
from chainlit.auth.jwt import get_jwt_secret
from chainlit.config import config
from chainlit.context import context, context_var
from chainlit.server import SOCKET_IO_PATH
from chainlit.server import app as server_app
from chainlit.session import WebsocketSession
from chainlit.step import StepDict

__all__ = [
    "SOCKET_IO_PATH",
    "WebsocketSession",
    "config",
    "context_session",
    "delete_step",
    "ensure_jwt_secret",
    "get_current_user",
    "get_jwt_secret",
    "get_token_from_cookies",
    "send_step",
    "server_app",
    "update_step",
]


def context_session() -> Any:
    """The session of the chat the current task serves, or None (an HTTP request)."""
    return getattr(context_var.get(None), "session", None)


async def send_step(step: StepDict) -> None:
    """``step`` shown on the current chat's page (not stored)."""
    await context.emitter.send_step(step)


async def update_step(step: StepDict) -> None:
    await context.emitter.update_step(step)


async def delete_step(step: StepDict) -> None:
    await context.emitter.delete_step(step)
