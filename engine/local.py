"""vLLM's ``AsyncLLM`` in this process: the default backend.

``LocalBackend.start(plan)`` builds the engine off the event loop (tens of seconds) with
vLLM's errors from its engine processes captured, so a failed start names its root
cause; ``generate`` passes token ids through and translates vLLM's exceptions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
from collections.abc import AsyncGenerator, Callable
from pathlib import Path

from vllm import SamplingParams
from vllm.inputs import TokensPrompt
from vllm.outputs import RequestOutput
from vllm.v1.engine.async_llm import AsyncLLM
from vllm.v1.engine.exceptions import EngineDeadError, EngineGenerateError

from engine.engine_args import build_engine_args
from engine.plan.capacity import CapacityReport, capacity_report
from engine.plan.plan import Plan
from engine.vllm_door.failures import describe_failure
from engine.vllm_door.internals import shut_down, unfinished_requests

from .core_errors import CoreErrorLog, ended_processes
from .errors import BackendDeadError, BackendStartError, GenerationError

__all__ = ["LocalBackend"]

logger = logging.getLogger(__name__)


class LocalBackend:
    """One ``AsyncLLM`` and the log of its processes' errors."""

    def __init__(self, llm: AsyncLLM, errors: CoreErrorLog, capacity: CapacityReport) -> None:
        self.llm = llm
        self.capacity = capacity
        self.max_model_len = int(llm.vllm_config.model_config.max_model_len)
        self.max_num_seqs = int(llm.vllm_config.scheduler_config.max_num_seqs)
        self._errors = errors
        self._errors_at_ready = errors.size()  # later errors are the running engine's

    @classmethod
    async def start(cls, plan: Plan, build: Callable[[], AsyncLLM] | None = None) -> LocalBackend:
        """Build the engine (or ``build()`` it: a client of a shared core);
        ``BackendStartError`` names the root cause and the fix."""
        errors = CoreErrorLog(Path(tempfile.mkdtemp(prefix="ernie-engine-")))
        build = build or (lambda: AsyncLLM.from_engine_args(build_engine_args(plan)))
        llm: AsyncLLM | None = None
        try:
            with errors:  # the engine's processes start inside: they log to the file
                llm = await asyncio.to_thread(build)
            capacity = await asyncio.to_thread(capacity_report, llm.vllm_config, plan)
        except Exception as exc:
            reason = _describe(exc, plan, errors)
            if llm is not None:
                await shut_down(llm)
            _remove(errors)
            raise BackendStartError(reason) from exc
        return cls(llm, errors, capacity)

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, request_id: str
    ) -> AsyncGenerator[RequestOutput, None]:
        stream = self.llm.generate(TokensPrompt(prompt_token_ids=prompt_ids), params, request_id)
        try:
            async with contextlib.aclosing(stream) as outputs:
                async for output in outputs:
                    yield output
        except EngineDeadError as exc:
            raise BackendDeadError(self.death_cause()) from exc
        except EngineGenerateError as exc:
            logger.error("request %s failed: %r", request_id, exc.__cause__)
            raise GenerationError() from exc

    async def abort(self, request_id: str) -> None:
        await self.llm.abort(request_id)

    @property
    def running(self) -> int:
        return unfinished_requests(self.llm)

    @property
    def errored(self) -> bool:
        return bool(self.llm.errored)

    def death_cause(self) -> str | None:
        """The root cause vLLM's processes logged after ready, and how they ended."""
        cause = self._errors.root_cause(self._errors_at_ready)
        # vLLM's own "EngineDeadError: ... see above" says nothing an operator can use.
        known = [c for c in (cause, ended_processes(self.llm)) if c and "EngineDead" not in c]
        return "; ".join(known) or None

    async def close(self) -> None:
        await shut_down(self.llm)
        _remove(self._errors)


def _describe(exc: Exception, plan: Plan, errors: CoreErrorLog) -> str:
    """One line for a failed start, with the engine processes' own root cause."""
    cause = errors.root_cause()
    if cause:
        logger.error("engine process failed with %s", cause)
    return describe_failure(exc, plan.settings, share=plan.memory_share, root_cause=cause)


def _remove(errors: CoreErrorLog) -> None:
    errors.close()
    shutil.rmtree(errors.folder, ignore_errors=True)
