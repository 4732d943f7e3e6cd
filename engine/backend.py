"""The seam between the app and whatever runs the model: one protocol, several backends.

Usage::

    backend = await open_backend(plan)          # BackendStartError: one line with the fix
    async for output in backend.generate(ids, params, request_id):
        output.outputs[0].token_ids, output.finished
    await backend.abort(request_id)
    backend.running, backend.errored, backend.capacity.lines()
    await backend.close()

Implementations: ``LocalBackend`` (vLLM's ``AsyncLLM`` in this process, ``engine.local``)
and ``RemoteBackend`` (``vllm serve`` processes over HTTP, ``engine.remote``). Each
translates its own failures into ``BackendDeadError`` (the engine is gone: rebuild it) and
``GenerationError`` (one reply failed), so the supervisor and the reply path above never
see vLLM's or httpx's exceptions. A front end of a shared engine core
(``ERNIE_WORKERS``, ``engine.shared_core``) is a ``LocalBackend`` whose ``AsyncLLM``
attaches to the core instead of starting one.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from vllm import SamplingParams

    from engine.plan.plan import Plan

    from .shared_core import Attachment

__all__ = [
    "Backend",
    "Completion",
    "Output",
    "Report",
    "open_backend",
]


class Completion(Protocol):
    """The part of vLLM's ``CompletionOutput`` the reply path reads."""

    @property
    def token_ids(self) -> Sequence[int]: ...
    @property
    def finish_reason(self) -> str | None: ...


class Output(Protocol):
    """The part of vLLM's ``RequestOutput`` (a ``DELTA`` request's) the reply path reads."""

    @property
    def outputs(self) -> Sequence[Completion]: ...
    @property
    def finished(self) -> bool: ...


class Report(Protocol):
    """A backend's capacity report, for the log and ``/readyz``."""

    def lines(self) -> list[str]: ...
    def as_dict(self) -> dict[str, Any]: ...


class Backend(Protocol):
    """A started engine that turns prompt token ids into streams of reply token ids."""

    max_model_len: int  # the longest prompt plus reply it serves
    max_num_seqs: int  # the largest batch it runs (the warm-up's largest)

    @property
    def capacity(self) -> Report:
        """What the started engine holds, for the log and ``/readyz``."""
        ...

    def generate(
        self, prompt_ids: list[int], params: SamplingParams, request_id: str
    ) -> AsyncGenerator[Output, None]:
        """The reply's token deltas; closing the iterator early aborts the request."""
        ...

    async def abort(self, request_id: str) -> None:
        """End a request now and free its place; unknown ids are ignored."""

    @property
    def running(self) -> int:
        """Requests held now (running or queued)."""
        ...

    @property
    def errored(self) -> bool:
        """Whether the engine died (the watchdog asks while no reply runs)."""
        ...

    def death_cause(self) -> str | None:
        """How the engine died, in one line, when the backend can tell."""

    async def close(self) -> None:
        """Stop the engine (or the connections) and free what it holds; idempotent."""


async def open_backend(plan: Plan, attachment: Attachment | None = None) -> Backend:
    """The backend the settings name (``ERNIE_ENGINE``), started and ready to generate;
    with ``attachment``, a client of the group's shared engine core (``ERNIE_WORKERS``)."""
    if plan.settings.engine == "remote":
        from .remote import RemoteBackend

        return await RemoteBackend.connect(plan.settings)
    from .local import LocalBackend
    from .shared_core import attach

    if attachment is not None and attachment.core is not None:
        core, index = attachment.core, attachment.index
        return await LocalBackend.start(plan, build=lambda: attach(core, index))
    return await LocalBackend.start(plan)
