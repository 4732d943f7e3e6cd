"""vLLM servers as the backend (``ERNIE_ENGINE=remote``): one or more OpenAI-compatible
``vllm serve`` processes, for example a fleet behind a router.

The app still builds each prompt with the model's chat template and decodes each reply
with its own tokenizer: the servers get token ids and send token ids back
(``return_token_ids``), so stop ids, buffering and Chinese text behave as with the
in-process engine. ``generate`` yields what ``AsyncLLM.generate`` yields for a
``DELTA`` request (the fields the reply path reads, ``engine.completions``), so the reply
path streams either backend the same way. Closing a reply's stream closes its HTTP
response, and vLLM's server aborts a request whose client went away.

Usage::

    remote = await RemoteBackend.connect(settings)   # each server answers, serves a model
    async for output in remote.generate(prompt_ids, params, request_id):
        output.outputs[0].token_ids, output.finished
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator
from dataclasses import asdict, dataclass
from typing import Any

import httpx
from httpx_sse import aconnect_sse
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_delay,
    wait_fixed,
)
from vllm import SamplingParams

from settings.settings import Settings, env_name
from settings.urls import redact

from .completions import (
    Collector,
    RemoteCompletion,
    RemoteOutput,
    RemoteServerError,
    completion_body,
)
from .errors import BackendStartError, GenerationError

__all__ = ["RemoteBackend", "RemoteReport", "RemoteServer"]

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 600.0  # between two events of a stream: a long queue on a busy server
REMOTE_BATCH = 256  # the largest batch warmed up: the servers size their own
KEEPALIVE_S = 3.0
UP_POLL_S = 2.0  # how often a server that is not up yet is asked again


class _NotUpError(RemoteServerError):
    """The server refused the connection, or a proxy before it said 502-504: not up yet."""


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
        servers = [asdict(s) | {"url": redact(s.url)} for s in self.servers]
        return {"backend": "remote", "servers": servers}

    def lines(self) -> list[str]:
        return [
            f"backend: remote, {len(self.servers)} vLLM server(s)",
            *(
                f"server {redact(s.url)}: model {s.model}, "
                f"max_model_len {s.max_model_len or 'unknown'}"
                for s in self.servers
            ),
        ]


@dataclass
class _Request:
    server: RemoteServer
    pump: asyncio.Task[None]  # reads the HTTP stream
    aborted: bool = False


class RemoteBackend:
    """The servers of ``ERNIE_REMOTE_URL``; each request goes to the one with the fewest
    open replies."""

    def __init__(self, client: httpx.AsyncClient, servers: list[RemoteServer], settings: Settings):
        self._client = client
        self.servers = servers
        self.capacity = RemoteReport(servers)
        lengths = [s.max_model_len for s in servers if s.max_model_len]
        # Every prompt must fit any server: the shortest context served.
        self.max_model_len = min([*lengths, settings.max_model_len])
        self.max_num_seqs = settings.max_num_seqs or REMOTE_BATCH
        self._requests: dict[str, _Request] = {}

    @classmethod
    async def connect(cls, settings: Settings) -> RemoteBackend:
        """Ask every server what it serves; ``BackendStartError`` names one that fails."""
        timeout = httpx.Timeout(CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S)
        # Idle connections close before vLLM's server closes them (its keep-alive: 5 s).
        limits = httpx.Limits(
            max_connections=None, max_keepalive_connections=64, keepalive_expiry=KEEPALIVE_S
        )
        logging.getLogger("httpx").setLevel(logging.WARNING)  # not a log line per reply
        key = settings.remote_api_key
        headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}
        client = httpx.AsyncClient(timeout=timeout, limits=limits, headers=headers)
        wait_s = settings.remote_wait_s
        try:
            servers = [await _once_up(client, url, wait_s) for url in settings.remote_urls]
        except RemoteServerError as exc:
            await client.aclose()
            waited = isinstance(exc, _NotUpError) and wait_s > 0
            said = f"{exc}, for {wait_s:.0f} s ({env_name('remote_wait_s')})" if waited else exc
            fix = f"check {env_name('remote_url')} and that vllm serve runs there"
            raise BackendStartError(f"{said}; {fix}") from None
        for server in servers:
            logger.info("remote engine: %s serves %s", redact(server.url), server.model)
        return cls(client, servers, settings)

    @property
    def running(self) -> int:
        return len(self._requests)

    def _least_busy(self) -> RemoteServer:
        open_replies = {s.url: 0 for s in self.servers}
        for request in self._requests.values():
            open_replies[request.server.url] += 1
        return min(self.servers, key=lambda s: open_replies[s.url])

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, request_id: str
    ) -> AsyncGenerator[RemoteOutput, None]:
        """Stream a reply's token deltas; the last output has ``finished`` set."""
        server = self._least_busy()
        body = completion_body(server.model, prompt_ids, params, request_id)
        outputs = Collector()
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
        except RemoteServerError as exc:
            logger.error("request %s failed: %s", request_id, exc)
            raise GenerationError() from exc
        finally:
            self._requests.pop(request_id, None)
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
        if request.aborted and not finished:
            yield RemoteOutput([RemoteCompletion([], "abort")], True)

    async def _pump(self, server: RemoteServer, body: dict[str, Any], outputs: Collector) -> None:
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
                    logger.info("remote engine: %s: %r, sending again", redact(server.url), exc)
        except asyncio.CancelledError:
            pass  # aborted, or the reply's stream was closed: the connection is gone
        except RemoteServerError as exc:
            outputs.fail(exc)
        except (httpx.HTTPError, httpx.StreamError, ValueError, KeyError) as exc:
            outputs.fail(RemoteServerError(f"{redact(server.url)} broke off the reply ({exc!r})"))
        finally:
            outputs.end()

    async def _read(self, server: RemoteServer, body: dict[str, Any], outputs: Collector) -> None:
        url = f"{server.url}/v1/completions"
        async with aconnect_sse(self._client, "POST", url, json=body) as source:
            if source.response.status_code != 200:
                await source.response.aread()
                raise RemoteServerError(
                    f"{redact(server.url)} refused the request: HTTP "
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

    @property
    def errored(self) -> bool:
        return False  # a server's failure fails its requests, one at a time

    def death_cause(self) -> str | None:
        return None

    async def close(self) -> None:
        await self._client.aclose()


async def _once_up(client: httpx.AsyncClient, url: str, wait_s: float) -> RemoteServer:
    """``_describe``, asked again every ``UP_POLL_S`` for ``wait_s`` while the server is not
    up (an app started beside its vllm serve: a compose file, a reboot) and said once."""

    def waiting(state: RetryCallState) -> None:
        if state.attempt_number == 1 and state.outcome is not None:
            why, setting = state.outcome.exception(), env_name("remote_wait_s")
            logger.warning("remote engine: %s; waiting up to %.0f s (%s)", why, wait_s, setting)

    retrying = AsyncRetrying(
        retry=retry_if_exception_type(_NotUpError),
        stop=stop_after_delay(wait_s),
        wait=wait_fixed(UP_POLL_S),
        before_sleep=waiting,
        reraise=True,
    )
    return await retrying(_describe, client, url)


async def _describe(client: httpx.AsyncClient, url: str) -> RemoteServer:
    """What the server at ``url`` serves; ``_NotUpError`` if nothing answers there yet,
    ``RemoteServerError`` if it answers wrong."""
    url = url.rstrip("/")
    try:
        response = await client.get(f"{url}/v1/models", timeout=CONNECT_TIMEOUT_S)
    except httpx.TransportError as exc:
        raise _NotUpError(f"{redact(url)} did not answer /v1/models ({exc!r})") from None
    if response.status_code in (502, 503, 504):
        raise _NotUpError(f"{redact(url)} answered /v1/models with {response.status_code}")
    try:
        response.raise_for_status()
        models = response.json()["data"]
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        raise RemoteServerError(f"{redact(url)} did not answer /v1/models ({exc!r})") from None
    if not models:
        raise RemoteServerError(f"{redact(url)} serves no model")
    return RemoteServer(url, str(models[0]["id"]), models[0].get("max_model_len"))
