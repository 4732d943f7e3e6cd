"""A request's body as the route door reads it: whole, replayed, counted against
``MAX_BODY_BYTES``, under a deadline; and the door's short answer.

Usage::

    receive = under_deadline(receive, 10)   # TooSlow if the body is not whole in 10 s
    body = await whole_body(receive)        # TooLarge past MAX_BODY_BYTES
    await app(scope, counting(replayed(body, receive)), send)
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

from starlette.types import Message, Receive, Send

__all__ = [
    "MAX_BODY_BYTES",
    "TooLarge",
    "TooSlow",
    "answer",
    "counting",
    "replayed",
    "under_deadline",
    "whole_body",
]

MAX_BODY_BYTES = 1 << 20  # the largest JSON the app's routes take is a few KiB


async def whole_body(receive: Receive) -> bytes:
    """The request's body, read whole (``TooLarge`` past ``MAX_BODY_BYTES``)."""
    chunks, counted = [], counting(receive)
    while True:
        message = await counted()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def replayed(body: bytes, receive: Receive) -> Receive:
    """``body`` once, as one message; then what the connection says (its end)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


class TooLarge(Exception):
    pass


class TooSlow(Exception):
    pass


def under_deadline(receive: Receive, seconds: float) -> Receive:
    """``receive``, with the request's body due whole within ``seconds`` (``TooSlow``);
    what comes after the body (a disconnect) is waited for as long as it takes."""
    due, whole = time.monotonic() + seconds, False

    async def timed() -> Message:
        nonlocal whole
        if whole:
            return await receive()
        try:
            message = await asyncio.wait_for(receive(), max(0.0, due - time.monotonic()))
        except TimeoutError:
            raise TooSlow from None
        whole = message.get("type") != "http.request" or not message.get("more_body", False)
        return message

    return timed


def counting(receive: Receive) -> Receive:
    received = 0

    async def counted() -> Message:
        nonlocal received
        message = await receive()
        received += len(message.get("body", b""))
        if received > MAX_BODY_BYTES:
            raise TooLarge
        return message

    return counted


async def answer(send: Send, status: int, detail: str, extra: Sequence[Any] = ()) -> None:
    """A short JSON answer that closes the connection."""
    body = json.dumps({"detail": detail}).encode()
    headers: list[Any] = [(b"content-type", b"application/json"), (b"connection", b"close")]
    headers += [(b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
