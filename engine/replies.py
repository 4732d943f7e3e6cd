"""The reply path: a chat message becomes a prompt, a token stream, text chunks and stats.

Usage::

    engine = ChatEngine.from_settings(settings)   # the checks before loading run here
    engine.start()
    await engine.wait_ready()
    async with contextlib.aclosing(engine.chat(history, "你好", request_id=rid)) as events:
        async for event in events:                # TextChunk ... then one ReplyEnd
            ...
    await engine.abort(rid)                       # from elsewhere, e.g. a stop button
    await engine.shutdown()

``ChatEngine`` is this path over a supervisor (``engine.supervisor``: the backend kept
alive), which it holds rather than is; the backend under it (``engine.backend``) is
whichever the settings name. It is the real ``ChatClient`` (``engine.client``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from typing import TYPE_CHECKING, Any

from vllm import SamplingParams

from engine.model.info import ModelInfo
from engine.model.system_prompts import resolve_system_prompt
from engine.plan.plan import Plan
from engine.plan.preflight import preflight
from settings.settings import Settings

from .backend import Backend, Output, Report
from .decode import IncrementalDecoder
from .errors import BackendDeadError, GenerationError, MessageRefusedError
from .message_check import check_message
from .prompt import Prompt, PromptBuilder, Turn
from .sampling import ChatOptions, build_sampling_params
from .stream import EngineTimes, ReplyEnd, ReplyStats, StreamEvent, TextChunk, TokenBuffer
from .supervisor import EngineStatus, Supervisor

if TYPE_CHECKING:
    from .shared_core import Attachment

__all__ = ["ChatEngine", "new_request_id"]

logger = logging.getLogger(__name__)


def new_request_id() -> str:
    return f"chat-{uuid.uuid4().hex}"


class ChatEngine:
    """The engine a chat talks to: its life cycle (the supervisor's), and replies."""

    def __init__(self, plan: Plan, attachment: Attachment | None = None) -> None:
        self.supervisor = Supervisor(plan, attachment)
        self._prompts: PromptBuilder | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> ChatEngine:
        """Check the settings against the model and the machine (SettingsError if wrong);
        the engine runs in this process: one core."""
        return cls(preflight(settings).alone())

    # --- the supervisor's, as the chat reads them ---------------------------------------
    @property
    def plan(self) -> Plan:
        return self.supervisor.plan

    @property
    def settings(self) -> Settings:
        return self.supervisor.settings

    @property
    def model(self) -> ModelInfo:
        return self.supervisor.model

    @property
    def backend(self) -> Backend:
        return self.supervisor.backend

    @property
    def capacity(self) -> Report:
        return self.supervisor.capacity

    @property
    def context_tokens(self) -> int:
        return self.backend.max_model_len

    @property
    def running_requests(self) -> int:
        return self.supervisor.running_requests

    def status(self) -> EngineStatus:
        return self.supervisor.status()

    def start(self) -> None:
        self.supervisor.start()

    async def wait_ready(self) -> None:
        await self.supervisor.wait_ready()

    async def wait_gave_up(self) -> str:
        return await self.supervisor.wait_gave_up()

    async def abort(self, request_id: str) -> None:
        await self.supervisor.abort(request_id)

    async def shutdown(self) -> None:
        await self.supervisor.shutdown()

    # --- the reply path -------------------------------------------------------------------
    def check_message(self, text: str) -> str:
        """``text`` cleaned for the prompt; ``MessageRefusedError`` if empty or too long.

        Needs no model, so a chat can be answered while the engine loads.
        """
        return check_message(text, max_chars=self.settings.max_message_chars)

    def build_prompt(
        self, history: Sequence[Turn], user_text: str, options: ChatOptions = ChatOptions()
    ) -> Prompt:
        """The token ids the engine will see for this message (oldest turns dropped to fit)."""
        prompts = self._prompt_builder()
        user_text = self.check_message(user_text)  # the front door's is taken as it is
        limit = self.settings.max_message_tokens
        if limit is not None and (tokens := prompts.count_tokens(user_text)) > limit:
            raise MessageRefusedError("too_many_tokens", tokens, limit)
        system = resolve_system_prompt(
            self.settings.system_prompt if options.system_prompt is None else options.system_prompt
        )
        return prompts.build(
            history,
            user_text,
            system_prompt=system,
            reply_budget=options.reply_budget(self.settings),
        )

    def _prompt_builder(self) -> PromptBuilder:
        """The model's prompt builder for the context the backend serves (made once)."""
        tokenizer, length = self.model.tokenizer, self.context_tokens
        built = self._prompts
        if built is None or built.tokenizer is not tokenizer or built.max_model_len != length:
            built = self._prompts = PromptBuilder(tokenizer, max_model_len=length)
        return built

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
        stream = self.stream(
            prompt.token_ids, params, request_id=request_id, dropped_turns=prompt.dropped_turns
        )
        async with contextlib.aclosing(stream) as events:
            async for event in events:
                yield event

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
        backend, ids = self.backend, list(prompt_token_ids)
        buffer = TokenBuffer(
            IncrementalDecoder(self.model.tokenizer, ids),
            interval_s=self.settings.stream_interval_ms / 1000,
        )
        tally = _Tally(prompt_tokens=len(ids))
        try:
            async with contextlib.aclosing(backend.generate(ids, params, request_id)) as outputs:
                async for output in outputs:
                    completion, now = output.outputs[0], time.monotonic()
                    tally.add(len(completion.token_ids), now)
                    tally.timed(output)
                    text = buffer.push(completion.token_ids, now=now)
                    if output.finished:
                        tally.finish_reason = completion.finish_reason or "stop"
                    if text:
                        yield TextChunk(text)
                        if not output.finished:
                            # Until the next flush is due, vLLM merges this request's
                            # tokens into one output: one wake-up per flush, not per token.
                            await asyncio.sleep(buffer.wait_s(time.monotonic()))
        except BackendDeadError as exc:
            self.supervisor.engine_died(exc.cause)
            raise self.supervisor.unavailable() from exc
        except (GeneratorExit, asyncio.CancelledError):
            # Stopped or dropped before the engine's end came back (the remote backend's
            # always is): the log still gets the reply's line.
            logger.info("request %s stopped: %s", request_id, tally.stats().summary())
            raise
        if tally.finish_reason not in ("stop", "length", "abort"):
            logger.error("request %s finished with %r", request_id, tally.finish_reason)
            raise GenerationError()
        if tail := buffer.drain():
            yield TextChunk(tail)
        stats = tally.stats()
        logger.info("request %s %s: %s", request_id, tally.finish_reason, stats.summary())
        yield ReplyEnd(tally.finish_reason, stats, dropped_turns)


class _Tally:
    """One reply's counts and times, from its submission."""

    def __init__(self, *, prompt_tokens: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.started = time.monotonic()
        self.first_token_at: float | None = None
        self.reply_tokens = 0
        self.finish_reason: Any = "abort"
        self.engine: EngineTimes | None = None

    def add(self, tokens: int, now: float) -> None:
        if tokens and self.first_token_at is None:
            self.first_token_at = now
        self.reply_tokens += tokens

    def timed(self, output: Output) -> None:
        """The engine's timestamps of the request so far (vLLM's ``RequestStateStats``, in
        its core's monotonic clock), where the backend has them."""
        times: Any = getattr(output, "metrics", None)
        first = getattr(times, "first_token_ts", 0.0)
        if not first or not times.scheduled_ts:
            return
        self.engine = EngineTimes(
            queued_s=max(0.0, times.scheduled_ts - times.queued_ts),
            reading_s=max(0.0, first - times.scheduled_ts),
            writing_s=max(0.0, times.last_token_ts - first),
            cached_tokens=int(getattr(output, "num_cached_tokens", 0) or 0),
        )

    def stats(self) -> ReplyStats:
        ttft = None if self.first_token_at is None else self.first_token_at - self.started
        duration = time.monotonic() - self.started
        return ReplyStats(self.prompt_tokens, self.reply_tokens, ttft, duration, self.engine)
