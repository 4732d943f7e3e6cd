"""The engine's life cycle: loading in the background, warm-up, a watchdog, rebuilds.

Usage::

    supervisor = Supervisor(plan, attachment)  # nothing loads yet (a group worker: its core)
    supervisor.start()                   # tokenizer, backend, warm-up, in the background
    supervisor.status()                  # loading (with seconds) / ready / restarting / failed
    await supervisor.wait_ready()        # then .backend, .model, .capacity
    await supervisor.shutdown()

A backend that dies (a reply sees ``BackendDeadError``, or the watchdog ``errored``) is
replaced, ``ERNIE_RESTART_TRIES`` times at most; then ``wait_gave_up`` returns the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.model.info import ModelInfo, load_model_info
from engine.plan.plan import Plan
from engine.vllm_door.failures import describe_failure
from settings.settings import env_name

from .backend import Backend, Report, open_backend
from .download import Download, DownloadError, fetch_model
from .errors import (
    BackendStartError,
    EngineError,
    EngineFailedError,
    EngineNotReadyError,
    EngineRestartingError,
)
from .prompt import PromptBuilder
from .sampling import ChatOptions, build_sampling_params

if TYPE_CHECKING:
    from vllm import SamplingParams

    from .shared_core import Attachment

__all__ = ["EngineState", "EngineStatus", "Supervisor"]

logger = logging.getLogger(__name__)

WARMUP_BATCH_SIZES = (1, 4, 16, 64)
WARMUP_TOKENS = 8
WARMUP_MESSAGE = "你好，请介绍一下你自己。"
WATCH_INTERVAL_S = 1.0


class EngineState(enum.Enum):
    NEW = "new"  # created, start() not called yet
    LOADING = "loading"  # tokenizer, weights, KV cache, warm-up
    READY = "ready"  # answering
    RESTARTING = "restarting"  # the engine died; a new one is being built
    FAILED = "failed"  # could not start, or could not be rebuilt; ``reason`` says why
    STOPPED = "stopped"  # shut down


@dataclass(frozen=True)
class EngineStatus:
    state: EngineState
    elapsed_s: float  # since start() (or the restart) while loading; load time once ready
    reason: str | None = None  # one line, when restarting or failed
    download: Download | None = None  # while the model's files are being fetched


class Supervisor:
    """One backend at a time, kept alive; what a chat needs to know about its state."""

    def __init__(self, plan: Plan, attachment: Attachment | None = None) -> None:
        self.plan = plan
        self.attachment = attachment  # a group's front end: its place on a shared engine core
        self.settings = plan.settings  # with profile values fitted to the model
        self._state = EngineState.NEW
        self._reason: str | None = None
        self._started_at = 0.0
        self._load_s = 0.0
        self._settled = asyncio.Event()
        self._gave_up = asyncio.Event()  # the engine died and could not be rebuilt
        self._tasks: dict[str, asyncio.Task[None]] = {}  # load or rebuild; watchdog
        self._backend: Backend | None = None
        self._model: ModelInfo | None = None
        self.download = Download()

    # --- what callers read ------------------------------------------------------------
    def status(self) -> EngineStatus:
        if self._state in (EngineState.LOADING, EngineState.RESTARTING):
            download = self.download if self.download.active else None
            elapsed = time.monotonic() - self._started_at
            return EngineStatus(self._state, elapsed, self._reason, download)
        return EngineStatus(self._state, self._load_s, self._reason)

    @property
    def backend(self) -> Backend:
        """The running backend (once ready)."""
        self.require_ready()
        assert self._backend is not None
        return self._backend

    @property
    def model(self) -> ModelInfo:
        """The model's tokenizer, stop ids and defaults (once ready)."""
        self.require_ready()
        assert self._model is not None
        return self._model

    @property
    def capacity(self) -> Report:
        """What the running backend holds (once ready)."""
        return self.backend.capacity

    @property
    def max_model_len(self) -> int:
        """The context the backend serves: the one length prompts and the panel use."""
        return self.backend.max_model_len

    @property
    def running_requests(self) -> int:
        return self._backend.running if self._backend is not None else 0

    def require_ready(self) -> None:
        if self._state is not EngineState.READY:
            raise self.unavailable()

    def unavailable(self) -> EngineError:
        """The error for a caller while the engine is not ready."""
        if self._state is EngineState.LOADING:
            return EngineNotReadyError(time.monotonic() - self._started_at)
        if self._state is EngineState.RESTARTING:
            return EngineRestartingError(self._reason or "the engine stopped")
        if self._state is EngineState.FAILED:
            return EngineFailedError(self._reason or "unknown")
        return EngineFailedError(f"the engine is {self._state.value}")

    # --- life cycle -------------------------------------------------------------------
    def start(self) -> None:
        """Begin loading in the background (needs a running event loop); idempotent."""
        if self._state is EngineState.STOPPED:
            raise RuntimeError("the engine has been shut down; create a new one")
        if self._state is not EngineState.NEW:
            return
        self._state = EngineState.LOADING
        self._started_at = time.monotonic()
        self._spawn("load", self._load())

    async def wait_ready(self) -> None:
        """Wait until loaded; raise EngineFailedError if loading failed, and
        EngineRestartingError at once while a dead engine is being replaced."""
        if self._state is EngineState.NEW:
            self.start()
        await self._settled.wait()
        self.require_ready()

    async def wait_gave_up(self) -> str:
        """Return (the reason) once the engine died and every rebuild failed."""
        await self._gave_up.wait()
        return self._reason or "the engine stopped"

    async def abort(self, request_id: str) -> None:
        """Stop a reply at once and free its place in the engine; unknown ids are ignored."""
        if self._backend is not None:
            await self._backend.abort(request_id)

    async def shutdown(self) -> None:
        """Stop the engine and free its memory; idempotent."""
        for task in self._tasks.values():
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._state = EngineState.STOPPED
        self._settled.set()
        await self._drop_backend()

    def _spawn(self, name: str, work: object) -> None:
        loop = asyncio.get_running_loop()
        self._tasks[name] = loop.create_task(work, name=f"engine-{name}")  # type: ignore[arg-type]

    async def _load(self) -> None:
        try:
            await asyncio.to_thread(fetch_model, self.settings, self.download)
            self._model = await asyncio.to_thread(load_model_info, self.settings)
            await self._open()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # every failure must show up in status(), not only the log
            logger.exception("engine failed to start")
            self._fail(self._reason_for(exc))
            return
        self._ready()
        logger.info("engine ready in %.1f s (model %s)", self._load_s, self.settings.model)

    async def _open(self) -> None:
        """A new backend, its capacity in the log, and its warm-up."""
        self._backend = await open_backend(self.plan, self.attachment)
        for line in self._backend.capacity.lines():
            logger.info("capacity: %s", line)
        if self.settings.warmup:
            await self._warm_up(self._backend)

    def _reason_for(self, exc: Exception) -> str:
        """One line for a failed start: the backend's own, or translated (the hub, say)."""
        if isinstance(exc, (BackendStartError, DownloadError)):
            return str(exc)
        return describe_failure(exc, self.settings, share=self.plan.memory_share)

    def _ready(self) -> None:
        self._load_s = time.monotonic() - self._started_at
        self._state = EngineState.READY
        self._reason = None
        self._settled.set()
        self._spawn("watchdog", self._watch())

    def _fail(self, reason: str) -> None:
        self._state = EngineState.FAILED
        self._reason = reason
        self._load_s = time.monotonic() - self._started_at
        self._settled.set()

    # --- warm-up ----------------------------------------------------------------------
    async def _warm_up(self, backend: Backend) -> None:
        """Run each batch size a chat app sees once, so no user pays the first-batch cost
        (vLLM's own server does not warm up: the app does it for remote servers too)."""
        assert self._model is not None
        prompts = PromptBuilder(self._model.tokenizer, max_model_len=backend.max_model_len)
        prompt = prompts.encode([{"role": "user", "content": WARMUP_MESSAGE}])
        options = ChatOptions(max_tokens=WARMUP_TOKENS)
        params = build_sampling_params(self.settings, self._model, options, ignore_eos=True)
        for size in (s for s in WARMUP_BATCH_SIZES if s <= backend.max_num_seqs):
            started = time.monotonic()
            await asyncio.gather(*(_drain(backend, prompt, params) for _ in range(size)))
            logger.info("warm-up: batch of %d in %.2f s", size, time.monotonic() - started)

    # --- death and rebuild ------------------------------------------------------------
    async def _watch(self) -> None:
        """Notice a dead engine even when no reply is running to see it."""
        while self._state is EngineState.READY and self._backend is not None:
            if self._backend.errored:
                self.engine_died(None)
                return
            await asyncio.sleep(WATCH_INTERVAL_S)

    def engine_died(self, cause: str | None) -> None:
        """Start replacing a dead engine (vLLM cannot revive an AsyncLLM whose core died)."""
        if self._state is not EngineState.READY:
            return  # already being replaced, or shut down
        if cause is None and self._backend is not None:
            cause = self._backend.death_cause()
        self._reason = f"the engine stopped: {cause or 'its process died'}"
        logger.error("%s; building a new engine", self._reason)
        self._state = EngineState.RESTARTING
        self._started_at = time.monotonic()
        self._spawn("load", self._rebuild())

    async def _drop_backend(self) -> None:
        """Close the dead (or half-built) backend: its processes and memory go."""
        if self._backend is not None:
            dead, self._backend = self._backend, None
            await dead.close()

    async def _rebuild(self) -> None:
        tries = self.settings.restart_tries
        failure = self._reason or "the engine stopped"
        for attempt in range(1, tries + 1):
            await self._drop_backend()
            try:
                await self._open()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.exception("rebuilding the engine failed (try %d of %d)", attempt, tries)
                failure = self._reason_for(exc)
                await asyncio.sleep(min(2**attempt, 30) if attempt < tries else 0)
                continue
            self._ready()
            logger.info("engine rebuilt in %.1f s (try %d of %d)", self._load_s, attempt, tries)
            return
        await self._drop_backend()
        self._fail(
            f"{failure} (not rebuilt: {env_name('restart_tries')}=0)"
            if tries == 0
            else f"the engine stopped and {tries} tries to rebuild it failed: {failure}"
        )
        logger.critical("%s", self._reason)
        self._gave_up.set()


async def _drain(backend: Backend, prompt: list[int], params: SamplingParams) -> None:
    stream = backend.generate(prompt, params, f"warmup-{uuid.uuid4().hex}")
    async with contextlib.aclosing(stream) as outputs:
        async for _ in outputs:
            pass
