"""No handler fails silently: an unexpected error reaches the user as one message in their
language, with a short reference that matches one line of the log.

Chainlit's own handling would log a traceback for each message and show the exception's
text to the user (``str(exc)``), or, for a chat start's task, nothing at all. Here every
chat handler reports an unexpected error itself: one ERROR line with the reference, the
handler and the cause on the console, the traceback only in the log file (at DEBUG), and
the chat goes on.

Usage::

    @cl.on_message
    @reported
    async def answer(message: cl.Message) -> None: ...

    reference = report(exc, "answer")     # where an error is caught and answered anyway
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import chainlit as cl

from .. import metrics
from ..words import chat_strings, error_text

__all__ = ["report", "reported", "send_error"]

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


def report(exc: BaseException, where: str) -> str:
    """Log ``exc`` in one line with a new reference (the traceback at DEBUG); the reference."""
    reference = secrets.token_hex(4)
    cause = str(exc).splitlines()[0] if str(exc) else ""
    logger.error("[%s] %s failed: %s: %s", reference, where, type(exc).__name__, cause)
    logger.debug("[%s] traceback", reference, exc_info=exc)
    return reference


def reported(handler: Callable[P, Awaitable[R | None]]) -> Callable[P, Awaitable[R | None]]:
    """``handler`` with its unexpected errors reported and answered (``report``)."""

    @functools.wraps(handler)
    async def run(*args: P.args, **kwargs: P.kwargs) -> R | None:
        try:
            return await handler(*args, **kwargs)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            with contextlib.suppress(Exception):  # the chat may be gone (a closed tab)
                await send_error(exc, handler.__name__)
            return None

    return run


async def send_error(exc: Exception, where: str = "the reply") -> None:
    """``exc`` in words in the chat; an unexpected one reported with its reference."""
    metrics.ERRORS.labels(kind=type(exc).__name__).inc()
    strings = chat_strings()
    text = error_text(exc, strings)
    if text is None:
        text = strings("unexpected_error", reference=report(exc, where))
    await cl.ErrorMessage(content=text).send()
