"""vLLM's completions API as the remote backend speaks it: the request for token ids, and
the reply's outputs, merged for a reader that sleeps between flushes.

The outputs have the shape of vLLM's own ``RequestOutput`` for a ``DELTA`` request (the
fields the reply path reads), so either backend streams the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vllm import SamplingParams

__all__ = ["Collector", "RemoteCompletion", "RemoteOutput", "RemoteServerError", "completion_body"]


class RemoteServerError(RuntimeError):
    """A server did not answer, or answered with an error; the message says which."""


@dataclass(frozen=True)
class RemoteCompletion:
    """The part of vLLM's ``CompletionOutput`` a chat reads."""

    token_ids: list[int]
    finish_reason: str | None


@dataclass(frozen=True)
class RemoteOutput:
    """The part of vLLM's ``RequestOutput`` a chat reads."""

    outputs: list[RemoteCompletion]
    finished: bool


class Collector:
    """One reply's outputs, merged until its reader takes them, as vLLM's own
    ``RequestOutputCollector`` does: a reader that sleeps until its next flush then gets
    every token that arrived meanwhile in one output."""

    def __init__(self) -> None:
        self._ids: list[int] = []
        self._reason: str | None = None
        self._error: RemoteServerError | None = None
        self._ended = False
        self._received = False
        self._ready = asyncio.Event()

    @property
    def received(self) -> bool:
        """Whether anything arrived yet (taken or not)."""
        return self._received

    def put(self, ids: list[int], reason: str | None) -> None:
        self._received = True
        self._ids += ids
        self._reason = reason or self._reason
        self._ready.set()

    def fail(self, error: RemoteServerError) -> None:
        self._error = error
        self._ready.set()

    def end(self) -> None:
        self._ended = True
        self._ready.set()

    async def take(self) -> RemoteOutput | None:
        """What arrived since the last take (waiting for something); None at the end."""
        await self._ready.wait()
        if self._ids or self._reason is not None:
            output = RemoteOutput(
                [RemoteCompletion(self._ids, self._reason)], self._reason is not None
            )
            self._ids, self._reason = [], None
            if not (self._ended or self._error):
                self._ready.clear()
            return output
        if self._error is not None:
            raise self._error
        return None


def completion_body(
    model: str, prompt_ids: Sequence[int], params: SamplingParams, request_id: str
) -> dict[str, Any]:
    """vLLM's completions request for these token ids and sampling parameters."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": list(prompt_ids),
        "stream": True,
        "max_tokens": params.max_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k if params.top_k > 0 else None,
        "min_p": params.min_p or None,
        "repetition_penalty": params.repetition_penalty,
        "stop_token_ids": list(params.stop_token_ids or []),
        "ignore_eos": params.ignore_eos,
        "seed": params.seed,
        "return_token_ids": True,
        "request_id": request_id,
    }
    return {k: v for k, v in body.items() if v is not None}
