"""vLLM servers as the engine (``ERNIE_ENGINE=remote``): one or more OpenAI-compatible
``vllm serve`` processes, for example a fleet behind a router.

The app still builds each prompt with the model's chat template and decodes each reply
with its own tokenizer: the servers get token ids and send token ids back
(``return_token_ids``), so stop ids, buffering and Chinese text behave as with the
in-process engine. ``generate`` yields what ``AsyncLLM.generate`` yields for a
``DELTA`` request (the fields the chat reads), so ``ChatEngine`` streams either the same
way. Closing a reply's stream closes its HTTP response, and vLLM's server aborts a
request whose client went away.

Usage::

    remote = RemoteEngine(["http://gpu-1:8000", "http://gpu-2:8000"])
    await remote.connect()                     # each server answers and serves a model
    async for output in remote.generate(prompt_ids, params, request_id):
        output.outputs[0].token_ids, output.finished
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
from httpx_sse import aconnect_sse
from vllm import SamplingParams

__all__ = ["RemoteEngine", "RemoteEngineError", "RemoteReport", "RemoteServer"]

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 600.0  # between two events of a stream: a long queue on a busy server
KEEPALIVE_S = 3.0


class RemoteEngineError(RuntimeError):
    """A server did not answer, or answered with an error; the message says which."""


@dataclass(frozen=True)
class RemoteServer:
    url: str
    model: str  # the name the server serves the model under
    max_model_len: int | None


@dataclass(frozen=True)
class RemoteReport:
    """The capacity report of a remote engine: its servers (each reports its own KV cache)."""

    servers: list[RemoteServer]

    def as_dict(self) -> dict[str, Any]:
        return {"backend": "remote", "servers": [asdict(s) for s in self.servers]}

    def lines(self) -> list[str]:
        return [
            f"backend: remote, {len(self.servers)} vLLM server(s)",
            *(
                f"server {s.url}: model {s.model}, max_model_len {s.max_model_len or 'unknown'}"
                for s in self.servers
            ),
        ]


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


class _Collector:
    """One reply's outputs, merged until its reader takes them, as vLLM's own
    ``RequestOutputCollector`` does: a reader that sleeps until its next flush then gets
    every token that arrived meanwhile in one output."""

    def __init__(self) -> None:
        self._ids: list[int] = []
        self._reason: str | None = None
        self._error: RemoteEngineError | None = None
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

    def fail(self, error: RemoteEngineError) -> None:
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


@dataclass
class _Request:
    server: RemoteServer
    pump: asyncio.Task[None]  # reads the HTTP stream
    aborted: bool = False


@dataclass
class RemoteEngine:
    """The servers at ``urls``; each request goes to the one with the fewest open replies."""

    urls: Sequence[str]
    servers: list[RemoteServer] = field(default_factory=list)
    _client: httpx.AsyncClient | None = None
    _requests: dict[str, _Request] = field(default_factory=dict)

    async def connect(self) -> None:
        """Ask every server what it serves; RemoteEngineError names one that fails."""
        timeout = httpx.Timeout(CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S)
        # Idle connections close before vLLM's server closes them (its keep-alive: 5 s).
        limits = httpx.Limits(
            max_connections=None, max_keepalive_connections=64, keepalive_expiry=KEEPALIVE_S
        )
        logging.getLogger("httpx").setLevel(logging.WARNING)  # not a log line per reply
        self._client = httpx.AsyncClient(timeout=timeout, limits=limits)
        self.servers = [await self._describe(url.rstrip("/")) for url in self.urls]
        for server in self.servers:
            logger.info("remote engine: %s serves %s", server.url, server.model)

    async def _describe(self, url: str) -> RemoteServer:
        assert self._client is not None
        try:
            response = await self._client.get(f"{url}/v1/models", timeout=CONNECT_TIMEOUT_S)
            response.raise_for_status()
            models = response.json()["data"]
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            raise RemoteEngineError(f"{url} did not answer /v1/models ({exc!r})") from None
        if not models:
            raise RemoteEngineError(f"{url} serves no model")
        return RemoteServer(url, str(models[0]["id"]), models[0].get("max_model_len"))

    @property
    def max_model_len(self) -> int | None:
        """The shortest context among the servers (every prompt must fit any of them)."""
        lengths = [s.max_model_len for s in self.servers if s.max_model_len]
        return min(lengths) if lengths else None

    @property
    def running(self) -> int:
        return len(self._requests)

    def _least_busy(self) -> RemoteServer:
        open_replies = {s.url: 0 for s in self.servers}
        for request in self._requests.values():
            open_replies[request.server.url] += 1
        return min(self.servers, key=lambda s: open_replies[s.url])

    async def generate(
        self, prompt_ids: Sequence[int], params: SamplingParams, request_id: str
    ) -> AsyncGenerator[RemoteOutput, None]:
        """Stream a reply's token deltas; the last output has ``finished`` set."""
        server = self._least_busy()
        body = completion_body(server.model, prompt_ids, params, request_id)
        outputs = _Collector()
        # The HTTP stream lives in a task of its own: abort() cancels it there (httpx
        # cannot close a stream from another task), and the server sees the client go.
        pump = asyncio.create_task(self._pump(server, body, outputs), name=request_id)
        request = _Request(server, pump)
        self._requests[request_id] = request
        finished = False
        try:
            while (output := await outputs.take()) is not None:
                finished = output.finished
                yield output
        finally:
            self._requests.pop(request_id, None)
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
        if request.aborted and not finished:
            yield RemoteOutput([RemoteCompletion([], "abort")], True)

    async def _pump(self, server: RemoteServer, body: dict[str, Any], outputs: _Collector) -> None:
        """Read one completion stream into ``outputs``, and end them however it ends.

        A connection that fails before any token is tried once more: a kept-alive
        connection the server closed just then is not a failed reply.
        """
        try:
            for attempt in (1, 2):
                try:
                    await self._read(server, body, outputs)
                    break
                except httpx.TransportError as exc:
                    if outputs.received or attempt == 2:
                        raise
                    logger.info("remote engine: %s: %r, sending again", server.url, exc)
        except asyncio.CancelledError:
            pass  # aborted, or the reply's stream was closed: the connection is gone
        except RemoteEngineError as exc:
            outputs.fail(exc)
        except (httpx.HTTPError, httpx.StreamError, ValueError, KeyError) as exc:
            outputs.fail(RemoteEngineError(f"{server.url} broke off the reply ({exc!r})"))
        finally:
            outputs.end()

    async def _read(self, server: RemoteServer, body: dict[str, Any], outputs: _Collector) -> None:
        assert self._client is not None, "connect() first"
        url = f"{server.url}/v1/completions"
        async with aconnect_sse(self._client, "POST", url, json=body) as source:
            if source.response.status_code != 200:
                await source.response.aread()
                raise RemoteEngineError(
                    f"{server.url} refused the request: HTTP "
                    f"{source.response.status_code} {source.response.text[:300]}"
                )
            # Read to the end, past [DONE]: httpx's inner iterators left open would be
            # closed by the garbage collector in another task, which they refuse.
            async with contextlib.aclosing(source.aiter_sse()) as events:
                async for event in events:
                    if event.data == "[DONE]":
                        continue
                    for choice in json.loads(event.data)["choices"]:  # one, or none
                        ids = list(choice.get("token_ids") or [])
                        outputs.put(ids, choice.get("finish_reason"))

    async def abort(self, request_id: str) -> None:
        """End a reply now: its HTTP stream closes, and the server aborts the request."""
        request = self._requests.get(request_id)
        if request is not None:
            request.aborted = True
            request.pump.cancel()

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


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
