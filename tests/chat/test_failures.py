"""No handler fails silently: an unexpected error is one log line with a reference and one
message in the chat's language with the same reference, never the error's own text."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from chainlit.context import init_http_context

from chat.ui.failures import reported


async def test_an_unexpected_error_is_one_line_and_one_message_with_its_reference(
    caplog: pytest.LogCaptureFixture,
) -> None:
    context = init_http_context()
    shown: list[dict[str, Any]] = []

    async def send_step(step: dict[str, Any]) -> None:
        shown.append(step)

    context.emitter.send_step = send_step  # type: ignore[method-assign]

    @reported
    async def answer() -> None:
        raise KeyError("the secret detail")

    with caplog.at_level(logging.DEBUG, logger="chat.ui.failures"):
        assert await answer() is None  # the chat goes on
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None  # one line, no traceback there
    (message,) = shown
    reference = message["output"].split("reference ")[1].split(")")[0]
    assert message["isError"] and f"[{reference}]" in errors[0].getMessage()
    assert "answer failed: KeyError" in errors[0].getMessage()
    assert "the secret detail" not in message["output"]
    traced = [r for r in caplog.records if r.levelno == logging.DEBUG and r.exc_info]
    assert traced and reference in traced[0].getMessage()  # the traceback: in the file only
