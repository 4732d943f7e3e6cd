"""Requests refused before their body is read, and websocket frames sized for messages.

Refused at once: uploads while uploads are off, Chainlit's thread-sharing routes while
sharing is off (they answered regardless), and bodies over ``MAX_BODY_BYTES``.

Chainlit's ``POST /project/file`` spools a whole upload to disk, then reads it into
memory, before it checks whether uploads are on; every other route takes small JSON.
This ASGI middleware answers such requests at once (403, 413), so no upload costs disk
or memory.

engine.io drops a websocket whose frame passes 1 MB, silently for the user; a long
Chinese paste, JSON-escaped by the client (6 bytes a character), passes that long before
the app's own limit (``ERNIE_MAX_MESSAGE_CHARS``) could answer it in words. Frames may
be as large as uvicorn's websocket limit (16 MiB), so such a message reaches the app
and gets its readable refusal; past that the browser loses the connection and says so.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from chainlit.config import config
from chainlit.server import SOCKET_IO_PATH, sio
from chainlit.server import app as server
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .addresses import AddressMiddleware, ProxyTrust

__all__ = ["MAX_BODY_BYTES", "MAX_FRAME_BYTES", "BodyGuard", "register"]

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20  # the largest JSON the app's routes take is a few KiB
MAX_FRAME_BYTES = 16 << 20  # uvicorn's own websocket limit (ws_max_size)
UPLOAD_PATH = "/project/file"
SHARING_PATHS = ("/project/thread/share", "/project/share/")  # answered with sharing off


class _TooLarge(Exception):
    pass


class BodyGuard:
    """Refuse uploads while uploads are off, and bodies over ``MAX_BODY_BYTES``."""

    def __init__(self, app: ASGIApp, *, uploads: bool, sharing: bool) -> None:
        self.app = app
        self.uploads = uploads
        self.sharing = sharing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or path.startswith(SOCKET_IO_PATH):
            return await self.app(scope, receive, send)
        if path.endswith(UPLOAD_PATH) and not self.uploads:
            return await _answer(send, 403, "uploads are off: this model reads text only")
        if any(part in path for part in SHARING_PATHS) and not self.sharing:
            return await _answer(send, 404, "chats are not shared here")
        declared = dict(scope.get("headers", [])).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > MAX_BODY_BYTES:
            return await _answer(send, 413, "request body too large")
        try:
            await self.app(scope, _counting(receive), send)
        except _TooLarge:  # a body sent without its length
            await _answer(send, 413, "request body too large")


def _counting(receive: Receive) -> Receive:
    received = 0

    async def counted() -> Message:
        nonlocal received
        message = await receive()
        received += len(message.get("body", b""))
        if received > MAX_BODY_BYTES:
            raise _TooLarge
        return message

    return counted


async def _answer(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers: list[Any] = [(b"content-type", b"application/json"), (b"connection", b"close")]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def register(trust: ProxyTrust) -> None:
    """Guard every HTTP route and note each request's address (idempotent: a reloaded
    app adds no second guard), and size the websocket's frames."""
    sio.eio.max_http_buffer_size = MAX_FRAME_BYTES
    factories: list[object] = [middleware.cls for middleware in server.user_middleware]
    if BodyGuard not in factories:
        uploads = bool(config.features.spontaneous_file_upload.enabled)
        sharing = bool(config.features.allow_thread_sharing)
        server.add_middleware(BodyGuard, uploads=uploads, sharing=sharing)
        server.add_middleware(AddressMiddleware, trust=trust)
