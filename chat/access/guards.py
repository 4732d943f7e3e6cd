"""Requests refused before their body is read, and websocket frames sized for messages.

Refused at once: uploads while uploads are off, Chainlit's thread-sharing routes while
sharing is off (they answered regardless), and bodies over ``MAX_BODY_BYTES``.

Chainlit's ``POST /project/file`` spools a whole upload to disk, then reads it into
memory, before it checks whether uploads are on; every other route takes small JSON.
This ASGI middleware answers such requests at once (403, 413), so no upload costs disk
or memory.

A websocket frame is sized for the longest message the app takes
(``ERNIE_MAX_MESSAGE_CHARS``): a paste ten times that long, JSON-escaped at 6 bytes a
character, still reaches the app and gets its refusal in words (``chat.access.admission``);
anything larger is not read at all: engine.io, and uvicorn's websocket before it
(``serve.web``), drop the connection, and the browser says so.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from chainlit.config import config
from chainlit.server import SOCKET_IO_PATH, sio
from chainlit.server import app as server
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .hosts import AllowedHosts, HostGuard
from .peers import AddressMiddleware, ProxyTrust

__all__ = ["MAX_BODY_BYTES", "BodyGuard", "frame_bytes", "register"]

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20  # the largest JSON the app's routes take is a few KiB
FRAME_ENVELOPE = 64 << 10  # a message's JSON around its text
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


def frame_bytes(max_message_chars: int) -> int:
    """The largest websocket frame read: a message of ten times the limit, escaped."""
    return 6 * 10 * max_message_chars + FRAME_ENVELOPE


def register(
    trust: ProxyTrust, hosts: AllowedHosts, max_message_chars: int, socket_timeout_s: float
) -> None:
    """Guard every HTTP route and websocket (the host, the body) and note each request's
    address (idempotent: a reloaded app adds no second guard), size the frames, and end
    a socket that answers no ping for ``socket_timeout_s`` (Engine.IO pings every half of
    it and waits the other half)."""
    sio.eio.max_http_buffer_size = frame_bytes(max_message_chars)
    sio.eio.ping_interval = sio.eio.ping_timeout = socket_timeout_s / 2
    factories: list[object] = [middleware.cls for middleware in server.user_middleware]
    if BodyGuard not in factories:
        uploads = bool(config.features.spontaneous_file_upload.enabled)
        sharing = bool(config.features.allow_thread_sharing)
        server.add_middleware(BodyGuard, uploads=uploads, sharing=sharing)
        server.add_middleware(AddressMiddleware, trust=trust)
        server.add_middleware(HostGuard, hosts=hosts)  # outermost: checked first
