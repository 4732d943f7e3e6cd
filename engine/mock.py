"""A ``ChatClient`` with scripted replies and no model: httpx's ``MockTransport`` for a chat.

Handlers, streaming, admission and the history are tested in-process on it, in
milliseconds; the end-to-end tests keep proving the real engine (``ChatEngine``).

Usage::

    engine = MockEngine(reply=lambda turns, text: f"echo: {text}")
    engine = MockEngine(reply=["chunk one ", "chunk two"], chunk_delay_s=0.01)
    engine = MockEngine(load_s=0.2)                 # loading, then ready
    engine = MockEngine(failure="no GPU")          # the load fails with this reason
    engine.requests[-1].history, engine.requests[-1].text   # what the engine was asked
    engine.fail_next(GenerationError())            # the next reply fails so
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from settings.settings import Settings

from .errors import EngineError, EngineFailedError, EngineNotReadyError
from .message_check import check_message
from .prompt import Turn
from .sampling import ChatOptions
from .stream import FinishReason, ReplyEnd, ReplyStats, StreamEvent, TextChunk
from .supervisor import EngineState, EngineStatus

__all__ = ["MockEngine", "MockModel", "MockRequest", "echo"]

DEFAULT_CONTEXT = 16_384  # the balanced profile's
Reply = Callable[[Sequence[Turn], str], str | Sequence[str]] | str | Sequence[str]


def echo(history: Sequence[Turn], text: str) -> str:
    """The default reply: the message back, with the turns before it counted."""
    return f"echo ({len(history)} turns before): {text}"


@dataclass(frozen=True)
class MockModel:
    is_demo: bool = False
    sampling_defaults: dict[str, Any] = field(default_factory=dict)


@dataclass
class MockRequest:
    """One reply the engine was asked for, and how it ended."""

    request_id: str
    history: list[Turn]
    text: str
    options: ChatOptions
    finish_reason: FinishReason | None = None  # None: still running, or closed early


class _Capacity:
    def lines(self) -> list[str]:
        return ["mock engine: no model"]

    def as_dict(self) -> dict[str, Any]:
        return {"backend": "mock"}


class MockEngine:
    """Scripted replies, a load that takes ``load_s`` (or fails), stops that stop."""

    def __init__(
        self,
        reply: Reply = echo,
        *,
        settings: Settings | None = None,
        load_s: float = 0.0,
        failure: str | None = None,
        chunk_delay_s: float = 0.0,
        chats_at_once: int = 4,
        model: MockModel | None = None,
    ) -> None:
        self.settings = settings or Settings(_env_file=None)  # type: ignore[call-arg]
        self.chats_at_once = chats_at_once
        self.model = model or MockModel()
        self.capacity = _Capacity()
        self.requests: list[MockRequest] = []
        self._reply, self._load_s, self._failure = reply, load_s, failure
        self.chunk_delay_s = chunk_delay_s  # between chunks: a test may change it
        self._state, self._started = EngineState.NEW, 0.0
        self._settled = asyncio.Event()
        self._running: dict[str, asyncio.Event] = {}  # request id -> its abort
        self._next_error: EngineError | None = None
        self._loader: asyncio.Task[None] | None = None

    @property
    def context_tokens(self) -> int:
        return self.settings.max_model_len or DEFAULT_CONTEXT

    @property
    def running_requests(self) -> int:
        return len(self._running)

    def status(self) -> EngineStatus:
        elapsed = time.monotonic() - self._started if self._started else 0.0
        return EngineStatus(self._state, elapsed, self._failure if self._failed else None)

    @property
    def _failed(self) -> bool:
        return self._state is EngineState.FAILED

    def start(self) -> None:
        if self._state is EngineState.NEW:
            self._state, self._started = EngineState.LOADING, time.monotonic()
            self._loader = asyncio.get_running_loop().create_task(self._load())

    async def _load(self) -> None:
        await asyncio.sleep(self._load_s)
        self._state = EngineState.FAILED if self._failure else EngineState.READY
        self._settled.set()

    async def wait_ready(self) -> None:
        self.start()
        await self._settled.wait()
        if self._failed:
            raise EngineFailedError(self._failure or "unknown")

    async def wait_gave_up(self) -> str:
        await asyncio.Event().wait()  # a mock never dies for good
        return ""

    async def shutdown(self) -> None:
        if self._loader is not None:
            self._loader.cancel()
        self._state = EngineState.STOPPED
        for aborted in self._running.values():
            aborted.set()

    def check_message(self, text: str) -> str:
        return check_message(text, max_chars=self.settings.max_message_chars)

    def fail_next(self, error: EngineError) -> None:
        """The next reply raises ``error`` (as the real one raises its translated errors)."""
        self._next_error = error

    async def abort(self, request_id: str) -> None:
        if request_id in self._running:
            self._running[request_id].set()

    def _chunks(self, history: Sequence[Turn], text: str) -> list[str]:
        reply = self._reply(history, text) if callable(self._reply) else self._reply
        return [reply] if isinstance(reply, str) else list(reply)

    async def chat(
        self,
        history: Sequence[Turn],
        user_text: str,
        *,
        request_id: str,
        options: ChatOptions = ChatOptions(),
    ) -> AsyncGenerator[StreamEvent, None]:
        if self._state is not EngineState.READY:
            raise EngineNotReadyError(self.status().elapsed_s)
        text = self.check_message(user_text)
        request = MockRequest(request_id, list(history), text, options)
        self.requests.append(request)
        error, self._next_error = self._next_error, None
        if error is not None:
            raise error
        aborted = self._running[request_id] = asyncio.Event()
        started, budget, sent = time.monotonic(), options.reply_budget(self.settings), 0
        reason: FinishReason = "stop"
        try:
            for chunk in self._chunks(history, text):
                await asyncio.sleep(self.chunk_delay_s)
                if aborted.is_set():
                    reason = "abort"
                    break
                if sent + len(chunk) > budget:  # a character a token, as far as a mock goes
                    chunk, reason = chunk[: budget - sent], "length"
                sent += len(chunk)
                if chunk:
                    yield TextChunk(chunk)
                if reason == "length":
                    break
            request.finish_reason = reason
            prompt = len(text) + sum(len(turn.content) for turn in history)  # a char a token
            stats = ReplyStats(prompt, sent, 0.0, time.monotonic() - started)
            yield ReplyEnd(reason, stats)
        finally:
            self._running.pop(request_id, None)


if TYPE_CHECKING:  # mypy holds the mock to the protocol the web app depends on
    from .client import ChatClient

    _IS_A_CHAT_CLIENT: ChatClient = MockEngine()
