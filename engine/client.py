"""What the web app needs of an engine, as a protocol (vLLM's ``EngineClient``, for a
chat): its state, its life cycle, the message check, a reply's stream, and a stop.

Usage (``chat`` depends on this, never on a concrete engine)::

    engine: ChatClient = ChatEngine.from_settings(settings)   # the real one
    engine: ChatClient = MockEngine(reply=lambda turns, text: "你好")  # tests (engine.mock)

Implementations: ``ChatEngine`` (``engine.replies``: a supervised vLLM backend) and
``MockEngine`` (``engine.mock``: scripted replies, no model), as httpx has its transports
and ``MockTransport``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .backend import Report
    from .prompt import Turn
    from .sampling import ChatOptions
    from .stream import StreamEvent
    from .supervisor import EngineStatus

__all__ = ["ChatClient", "ModelFacts"]


class ModelFacts(Protocol):
    """What a chat shows of the model: whether it is the offline demo, and the sampling
    defaults its generation config sets (the panel starts from them)."""

    @property
    def is_demo(self) -> bool: ...
    @property
    def sampling_defaults(self) -> dict[str, Any]: ...


class ChatClient(Protocol):
    """An engine a chat talks to."""

    @property
    def model(self) -> ModelFacts:
        """The model's facts (once ready)."""
        ...

    @property
    def capacity(self) -> Report:
        """What the running engine holds (once ready), for the log and ``/readyz``."""
        ...

    @property
    def context_tokens(self) -> int:
        """The model's context: the longest prompt plus reply (once ready)."""
        ...

    @property
    def running_requests(self) -> int:
        """Replies the engine holds now."""
        ...

    def status(self) -> EngineStatus:
        """Loading (with seconds), ready, restarting or failed (with a reason)."""
        ...

    def start(self) -> None:
        """Begin loading in the background; idempotent."""

    async def wait_ready(self) -> None:
        """Wait until ready; ``EngineFailedError`` or ``EngineRestartingError`` if not."""

    async def wait_gave_up(self) -> str:
        """Return the reason once the engine died for good."""
        ...

    async def shutdown(self) -> None:
        """Stop the engine; idempotent."""

    def check_message(self, text: str) -> str:
        """``text`` cleaned for the prompt; ``MessageRefusedError`` if it cannot be sent."""
        ...

    def chat(
        self,
        history: Sequence[Turn],
        user_text: str,
        *,
        request_id: str,
        options: ChatOptions = ...,
    ) -> AsyncGenerator[StreamEvent, None]:
        """The reply to ``user_text`` after ``history``: text chunks, then one ``ReplyEnd``;
        closing the stream early stops the reply in the engine."""
        ...

    async def abort(self, request_id: str) -> None:
        """Stop a reply at once; unknown ids are ignored."""
