"""The one in-process vLLM engine, its life cycle and its reply streams.

Usage::

    engine = ChatEngine.shared()                 # one per process, from the settings
    engine.start()                               # loads in the background
    engine.status()                  # loading (with seconds) / ready / restarting / failed
    await engine.wait_ready()
    async with contextlib.aclosing(engine.chat(history, "你好", request_id=rid)) as events:
        async for event in events:               # TextChunk ... then one ReplyEnd
            ...
    await engine.abort(rid)                      # from elsewhere, e.g. a stop button
    await engine.shutdown()
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from vllm import SamplingParams
from vllm.inputs import TokensPrompt
from vllm.v1.engine.async_llm import AsyncLLM
from vllm.v1.engine.exceptions import EngineDeadError, EngineGenerateError

from .capacity import CapacityReport, capacity_report
from .decode import IncrementalDecoder
from .engine_args import build_engine_args
from .errors import (
    EngineError,
    EngineFailedError,
    EngineNotReadyError,
    EngineRestartingError,
    GenerationError,
    MessageRefusedError,
)
from .failures import CoreErrorLog, describe_failure, ended_processes
from .message_check import check_message
from .model_info import ModelInfo, load_model_info
from .preflight import Plan, preflight
from .prompt import Prompt, PromptBuilder, Turn, resolve_system_prompt
from .remote import RemoteEngine, RemoteEngineError, RemoteReport
from .sampling import ChatOptions, build_sampling_params
from .settings import Settings, env_name, load_settings
from .stream import ReplyEnd, ReplyStats, StreamEvent, TextChunk, TokenBuffer

__all__ = ["ChatEngine", "EngineState", "EngineStatus", "new_request_id"]

logger = logging.getLogger(__name__)

WARMUP_BATCH_SIZES = (1, 4, 16, 64)
WARMUP_TOKENS = 8
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


def new_request_id() -> str:
    return f"chat-{uuid.uuid4().hex}"


class ChatEngine:
    """One vLLM ``AsyncLLM`` (or, with ``ERNIE_ENGINE=remote``, vLLM servers) and what a
    chat needs around it."""

    _shared: ClassVar[ChatEngine | None] = None

    def __init__(self, settings: Settings) -> None:
        """Check the settings against the model and the machine (SettingsError if wrong)."""
        self.plan: Plan = preflight(settings)
        self.settings = self.plan.settings  # with profile values fitted to the model
        self._state = EngineState.NEW
        self._reason: str | None = None
        self._started_at = 0.0
        self._load_s = 0.0
        self._settled = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._llm: AsyncLLM | None = None
        self._remote: RemoteEngine | None = None  # instead of _llm, for ERNIE_ENGINE=remote
        self._model: ModelInfo | None = None
        self._prompts: PromptBuilder | None = None
        self._capacity: CapacityReport | RemoteReport | None = None
        self._system_prompt = resolve_system_prompt(settings.system_prompt)
        self._errors: CoreErrorLog | None = None  # vLLM's errors, from the engine's processes
        self._errors_at_ready = 0
        self._watchdog: asyncio.Task[None] | None = None
        self._gave_up = asyncio.Event()  # the engine died and could not be rebuilt

    @classmethod
    def shared(cls) -> ChatEngine:
        """The process's engine: created from the settings on first use, then reused
        (a reloaded app module, as under ``chainlit run -w``, gets the same one)."""
        if cls._shared is None:
            cls._shared = cls(load_settings())
        return cls._shared

    # --- life cycle -------------------------------------------------------------------
    def status(self) -> EngineStatus:
        if self._state in (EngineState.LOADING, EngineState.RESTARTING):
            return EngineStatus(self._state, time.monotonic() - self._started_at, self._reason)
        return EngineStatus(self._state, self._load_s, self._reason)

    @property
    def model(self) -> ModelInfo:
        """The model's tokenizer, stop ids and defaults (once ready)."""
        self._require_ready()
        assert self._model is not None
        return self._model

    @property
    def capacity(self) -> CapacityReport | RemoteReport:
        """What the loaded engine holds (once ready)."""
        self._require_ready()
        assert self._capacity is not None
        return self._capacity

    def start(self) -> None:
        """Begin loading in the background (needs a running event loop); idempotent."""
        if self._state is EngineState.STOPPED:
            raise RuntimeError("the engine has been shut down; create a new one")
        if self._state is not EngineState.NEW:
            return
        self._state = EngineState.LOADING
        self._started_at = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._load(), name="engine-load")

    async def wait_ready(self) -> None:
        """Wait until loaded; raise EngineFailedError if loading failed, and
        EngineRestartingError at once while a dead engine is being replaced."""
        if self._state is EngineState.NEW:
            self.start()
        await self._settled.wait()
        self._require_ready()

    async def wait_gave_up(self) -> str:
        """Return (the reason) once the engine died and every rebuild failed."""
        await self._gave_up.wait()
        return self._reason or "the engine stopped"

    async def shutdown(self) -> None:
        """Stop the engine and free its memory; idempotent."""
        for task in (self._task, self._watchdog):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._state = EngineState.STOPPED
        self._settled.set()
        if self._llm is not None:
            self._llm.shutdown()
            self._llm = None
        if self._remote is not None:
            await self._remote.aclose()
            self._remote = None
        self._close_error_log()
        if ChatEngine._shared is self:
            ChatEngine._shared = None

    async def _load(self) -> None:
        try:
            self._model = await asyncio.to_thread(load_model_info, self.settings)
            self._prompts = PromptBuilder(
                self._model.tokenizer, max_model_len=self.settings.max_model_len
            )
            await self._build_engine()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # every failure must show up in status(), not only the log
            logger.exception("engine failed to start")
            self._fail(self._describe(exc))
            return
        self._ready()
        logger.info("engine ready in %.1f s (model %s)", self._load_s, self.settings.model)

    async def _build_engine(self) -> None:
        """A new AsyncLLM (or the remote servers), its capacity report and its warm-up."""
        if self.settings.engine == "remote":
            await self._connect_remote()
        else:
            await self._start_local()
        if self.settings.warmup:
            await self._warm_up()

    async def _start_local(self) -> None:
        args = build_engine_args(self.settings, cpu=self.plan.hardware.cpu)
        self._close_error_log()
        self._errors = CoreErrorLog(Path(tempfile.mkdtemp(prefix="ernie-engine-")))
        # Building blocks for the whole load (tens of seconds): keep it off the loop.
        with self._errors:
            self._llm = await asyncio.to_thread(AsyncLLM.from_engine_args, args)
        self._capacity = await asyncio.to_thread(capacity_report, self._llm.vllm_config, self.plan)
        for line in self._capacity.lines():
            logger.info("capacity: %s", line)

    async def _connect_remote(self) -> None:
        """Ask the servers what they serve; prompts must fit the shortest context."""
        assert self._model is not None
        self._close_error_log()
        self._remote = RemoteEngine(self.settings.remote_urls)
        await self._remote.connect()
        self._capacity = RemoteReport(self._remote.servers)
        for line in self._capacity.lines():
            logger.info("capacity: %s", line)
        served = self._remote.max_model_len
        if served is not None and served < self.settings.max_model_len:
            self._prompts = PromptBuilder(self._model.tokenizer, max_model_len=served)

    def _describe(self, exc: Exception) -> str:
        """One line for a failed build, with the engine processes' own root cause."""
        if isinstance(exc, RemoteEngineError):
            return f"{exc}; check {env_name('remote_url')} and that vllm serve runs there"
        cause = self._errors.root_cause() if self._errors else None
        if cause:
            logger.error("engine process failed with %s", cause)
        share = self.plan.memory_share
        return describe_failure(exc, self.settings, share=share, root_cause=cause)

    def _close_error_log(self) -> None:
        if self._errors is not None:
            self._errors.close()
            shutil.rmtree(self._errors.folder, ignore_errors=True)
            self._errors = None

    def _ready(self) -> None:
        self._load_s = time.monotonic() - self._started_at
        # Later errors are the running engine's (a remote engine's are in its servers' logs).
        self._errors_at_ready = self._errors.size() if self._errors else 0
        self._state = EngineState.READY
        self._reason = None
        self._settled.set()
        self._watchdog = asyncio.get_running_loop().create_task(
            self._watch(), name="engine-watchdog"
        )

    def _fail(self, reason: str) -> None:
        self._state = EngineState.FAILED
        self._reason = reason
        self._load_s = time.monotonic() - self._started_at
        self._settled.set()

    # --- death and rebuild ----------------------------------------------------------------
    async def _watch(self) -> None:
        """Notice a dead engine even when no reply is running to see it."""
        while self._state is EngineState.READY and self._llm is not None:
            if self._llm.errored:
                self._engine_died(None)
                return
            await asyncio.sleep(WATCH_INTERVAL_S)

    def _engine_died(self, error: BaseException | None) -> None:
        """Start replacing a dead engine (vLLM cannot revive an AsyncLLM whose core died)."""
        if self._state is not EngineState.READY:
            return  # already being replaced, or shut down
        cause = self._errors.root_cause(self._errors_at_ready) if self._errors else None
        # vLLM's own "EngineDeadError: ... see above" says nothing an operator can use.
        known = [c for c in (cause, ended_processes(self._llm)) if c and "EngineDead" not in c]
        self._reason = f"the engine stopped: {'; '.join(known) or error or 'its process died'}"
        logger.error("%s; building a new engine", self._reason)
        self._state = EngineState.RESTARTING
        self._started_at = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._rebuild(), name="engine-rebuild")

    async def _drop_engine(self) -> None:
        """Shut down the dead (or half-built) engine: its processes and memory go."""
        if self._llm is not None:
            dead, self._llm = self._llm, None
            await asyncio.to_thread(dead.shutdown)

    async def _rebuild(self) -> None:
        tries = self.settings.restart_tries
        failure = self._reason or "the engine stopped"
        for attempt in range(1, tries + 1):
            await self._drop_engine()
            try:
                await self._build_engine()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.exception("rebuilding the engine failed (try %d of %d)", attempt, tries)
                failure = self._describe(exc)
                await asyncio.sleep(min(2**attempt, 30) if attempt < tries else 0)
                continue
            self._ready()
            logger.info("engine rebuilt in %.1f s (try %d of %d)", self._load_s, attempt, tries)
            return
        await self._drop_engine()
        self._fail(
            f"{failure} (not rebuilt: {env_name('restart_tries')}=0)"
            if tries == 0
            else f"the engine stopped and {tries} tries to rebuild it failed: {failure}"
        )
        logger.critical("%s", self._reason)
        self._gave_up.set()

    async def _warm_up(self) -> None:
        """Run each batch size a chat app sees once, so no user pays the first-batch cost
        (vLLM's own server does not warm up: the app does it for its remote servers too)."""
        assert self._model is not None and self._prompts is not None
        prompt = self._prompts.encode([{"role": "user", "content": "你好，请介绍一下你自己。"}])
        params = build_sampling_params(
            self.settings,
            self._model,
            ChatOptions(max_tokens=WARMUP_TOKENS),
            ignore_eos=True,
        )
        largest = (
            self._llm.vllm_config.scheduler_config.max_num_seqs
            if self._llm is not None
            else self.settings.max_num_seqs
        )
        for size in (s for s in WARMUP_BATCH_SIZES if s <= largest):
            started = time.monotonic()
            await asyncio.gather(*(self._drain(prompt, params) for _ in range(size)))
            logger.info("warm-up: batch of %d in %.2f s", size, time.monotonic() - started)

    async def _drain(self, prompt: list[int], params: SamplingParams) -> None:
        stream = self._generate(prompt, params, f"warmup-{uuid.uuid4().hex}")
        async with contextlib.aclosing(stream) as outputs:
            async for _ in outputs:
                pass

    def _require_ready(self) -> None:
        if self._state is not EngineState.READY:
            raise self._unavailable()

    def _unavailable(self) -> EngineError:
        """The error for a caller while the engine is not ready."""
        if self._state is EngineState.LOADING:
            return EngineNotReadyError(time.monotonic() - self._started_at)
        if self._state is EngineState.RESTARTING:
            return EngineRestartingError(self._reason or "the engine stopped")
        if self._state is EngineState.FAILED:
            return EngineFailedError(self._reason or "unknown")
        return EngineFailedError(f"the engine is {self._state.value}")

    # --- requests ---------------------------------------------------------------------
    @property
    def running_requests(self) -> int:
        """Requests the engine holds now (running or queued)."""
        if self._remote is not None:
            return self._remote.running
        if self._llm is None:
            return 0
        processor: Any = self._llm.output_processor
        return int(processor.get_num_unfinished_requests())

    async def abort(self, request_id: str) -> None:
        """Stop a reply at once and free its place in the engine; unknown ids are ignored."""
        if self._llm is not None:
            await self._llm.abort(request_id)
        elif self._remote is not None:
            await self._remote.abort(request_id)

    def check_message(self, text: str) -> str:
        """``text`` cleaned for the prompt; ``MessageRefusedError`` if empty or too long.

        Needs no model, so a chat can be answered while the engine loads.
        """
        return check_message(text, max_chars=self.settings.max_message_chars)

    def build_prompt(
        self, history: Sequence[Turn], user_text: str, options: ChatOptions = ChatOptions()
    ) -> Prompt:
        """The token ids the engine will see for this message (oldest turns dropped to fit)."""
        self._require_ready()
        assert self._prompts is not None
        user_text = self.check_message(user_text)
        limit = self.settings.max_message_tokens
        if limit is not None and (tokens := self._prompts.count_tokens(user_text)) > limit:
            raise MessageRefusedError("too_many_tokens", tokens, limit)
        system = (
            self._system_prompt
            if options.system_prompt is None
            else resolve_system_prompt(options.system_prompt)
        )
        return self._prompts.build(
            history,
            user_text,
            system_prompt=system,
            reply_budget=options.reply_budget(self.settings),
        )

    async def chat(
        self,
        history: Sequence[Turn],
        user_text: str,
        *,
        request_id: str,
        options: ChatOptions = ChatOptions(),
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream the reply to ``user_text`` after ``history``."""
        prompt = self.build_prompt(history, user_text, options)
        params = build_sampling_params(self.settings, self.model, options)
        async for event in self.stream(
            prompt.token_ids, params, request_id=request_id, dropped_turns=prompt.dropped_turns
        ):
            yield event

    def _generate(
        self, ids: list[int], params: SamplingParams, request_id: str
    ) -> AsyncGenerator[Any, None]:
        """The engine's stream of outputs for one request (AsyncLLM's, or the servers')."""
        if self._remote is not None:
            return self._remote.generate(ids, params, request_id)
        assert self._llm is not None
        return self._llm.generate(TokensPrompt(prompt_token_ids=ids), params, request_id)

    async def stream(
        self,
        prompt_token_ids: Sequence[int],
        params: SamplingParams,
        *,
        request_id: str,
        dropped_turns: int = 0,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream a reply to raw prompt ids: buffered text chunks, then one ReplyEnd.

        Closing this generator early (or cancelling its consumer) aborts the request
        in the engine at once.
        """
        self._require_ready()
        assert self._model is not None
        ids = list(prompt_token_ids)
        decoder = IncrementalDecoder(self._model.tokenizer, ids)
        buffer = TokenBuffer(decoder, interval_s=self.settings.stream_interval_ms / 1000)
        started = time.monotonic()
        first_token_at: float | None = None
        reply_tokens = 0
        finish_reason: Any = "abort"
        try:
            outputs = self._generate(ids, params, request_id)
            async with contextlib.aclosing(outputs) as stream:
                async for output in stream:
                    completion = output.outputs[0]
                    now = time.monotonic()
                    if completion.token_ids and first_token_at is None:
                        first_token_at = now
                    reply_tokens += len(completion.token_ids)
                    text = buffer.push(completion.token_ids, now=now)
                    if output.finished:
                        finish_reason = completion.finish_reason or "stop"
                    if text:
                        yield TextChunk(text)
                        if not output.finished:
                            # Until the next flush is due, vLLM merges this request's
                            # tokens into one output: one wake-up per flush, not per token.
                            await asyncio.sleep(buffer.wait_s(time.monotonic()))
        except EngineDeadError as exc:
            self._engine_died(exc)
            raise self._unavailable() from exc
        except EngineGenerateError as exc:
            logger.error("request %s failed: %r", request_id, exc.__cause__)
            raise GenerationError() from exc
        except RemoteEngineError as exc:
            logger.error("request %s failed: %s", request_id, exc)
            raise GenerationError() from exc
        if finish_reason not in ("stop", "length", "abort"):
            logger.error("request %s finished with %r", request_id, finish_reason)
            raise GenerationError()
        tail = buffer.drain()
        if tail:
            yield TextChunk(tail)
        ttft = None if first_token_at is None else first_token_at - started
        stats = ReplyStats(len(ids), reply_tokens, ttft, time.monotonic() - started)
        logger.info("request %s %s: %s", request_id, finish_reason, stats.summary())
        yield ReplyEnd(finish_reason, stats, dropped_turns)
