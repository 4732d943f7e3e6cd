"""The ``engine`` path: vLLM's ``AsyncLLM`` in this process, with its own detokenizer, the
ceiling every other path is measured against (``bench.cores`` runs one in each of K
processes). The only part of the bench that imports vLLM: ``python -m bench`` loads it
for these two paths alone.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from dataclasses import replace
from typing import Any

from vllm import SamplingParams
from vllm.inputs import TokensPrompt
from vllm.sampling_params import RequestOutputKind
from vllm.v1.engine.async_llm import AsyncLLM

from engine.engine_args import build_engine_args
from engine.model.info import load_model_info
from engine.model.system_prompts import resolve_system_prompt
from engine.plan.plan import Plan
from engine.prompt import PromptBuilder
from engine.prompt import Turn as HistoryTurn
from engine.vllm_door.internals import shut_down

from .measure import LoadResult, Loads, ProcessWatch, ReplyTiming, measure_loads, timed
from .openloop import OpenLoop, RateResult, Turn, run_rate, sweep
from .paths import PROMPT, Converse
from .talk import think
from .traffic import Conversation

__all__ = [
    "OLD_CAP",
    "engine_conversation",
    "engine_load",
    "engine_path",
    "engine_request",
    "engine_talker",
]


async def _drain(llm: AsyncLLM, prompt: list[int], params: SamplingParams) -> ReplyTiming:
    request_id = f"bench-{os.urandom(8).hex()}"
    sent, first, frames = time.monotonic(), None, 0
    async for output in llm.generate(TokensPrompt(prompt_token_ids=prompt), params, request_id):
        if output.outputs[0].token_ids:
            frames += 1
            first = first or time.monotonic()
    now = time.monotonic()
    return ReplyTiming(sent, first or now, now, frames)


def engine_request(plan: Plan, reply_tokens: int) -> tuple[list[int], SamplingParams]:
    """The bench's first message as the app would send it, and its sampling parameters."""
    settings = plan.settings
    model = load_model_info(settings)
    prompt = PromptBuilder(model.tokenizer, max_model_len=settings.max_model_len).build(
        [],
        PROMPT,
        system_prompt=resolve_system_prompt(settings.system_prompt),
        reply_budget=reply_tokens,
    )
    params = SamplingParams(  # the model's sampling defaults, as the app and vLLM's server use
        max_tokens=reply_tokens,
        ignore_eos=True,  # and no stop ids: every reply runs to reply_tokens, as the app's
        output_kind=RequestOutputKind.DELTA,
        **model.sampling_defaults,
    )
    return prompt.token_ids, params


async def engine_load(
    llm: AsyncLLM, request: tuple[list[int], SamplingParams], chats: int
) -> list[ReplyTiming]:
    """``chats`` replies at once from ``llm``."""
    return list(await asyncio.gather(*(_drain(llm, *request) for _ in range(chats))))


def engine_talker(plan: Plan, llm: AsyncLLM) -> Converse:
    """Conversations straight to ``llm``, prompts built as the app builds them."""
    settings = plan.settings
    model = load_model_info(settings)
    builder = PromptBuilder(model.tokenizer, max_model_len=settings.max_model_len)
    defaults = {"system_prompt": resolve_system_prompt(settings.system_prompt)}
    defaults["sampling"] = model.sampling_defaults
    return functools.partial(engine_conversation, llm, builder, defaults)


def OLD_CAP(plan: Plan) -> Plan:
    """The plan with the batch the app gave one engine before it sized it from the device
    (``engine@256``: 256 sequences, vLLM's engine default of 2,048 tokens a step)."""
    old = {"max_num_seqs": 256, "max_num_batched_tokens": 2048}
    return replace(plan, settings=plan.settings.with_values("the old cap", **old))


async def engine_path(
    plan: Plan, loads: Loads, open_loop: OpenLoop | None = None, *, name: str = "engine"
) -> tuple[list[LoadResult], list[RateResult]]:
    """The raw AsyncLLM in this process, vLLM's own detokenizer: the ceiling (its batch
    the app's for one core: ``engine.plan.batch``)."""
    request = engine_request(plan, loads.reply_tokens)
    llm = AsyncLLM.from_engine_args(build_engine_args(plan))
    watch = ProcessWatch(os.getpid())
    try:
        load = timed(watch, lambda chats: engine_load(llm, request, chats))
        closed = await measure_loads(name, loads, watch, load)
        if open_loop is None:
            return closed, []
        run = functools.partial(run_rate, engine_talker(plan, llm))
        return closed, await sweep(name, run, open_loop)
    finally:
        watch.close()
        await shut_down(llm)


async def engine_conversation(
    llm: AsyncLLM, builder: PromptBuilder, defaults: dict[str, Any], conversation: Conversation
) -> list[Turn]:
    """The conversation straight to an engine, its history kept here; ``defaults``: the
    system prompt and the model's sampling defaults, as the app sends them."""
    history: list[HistoryTurn] = []
    system, sampling = defaults["system_prompt"], defaults["sampling"]
    turns = []
    for index, question in enumerate(conversation.questions):
        await think(conversation, index)
        tokens = conversation.reply_tokens
        prompt = builder.build(history, question, system_prompt=system, reply_budget=tokens)
        delta = RequestOutputKind.DELTA
        params = SamplingParams(max_tokens=tokens, ignore_eos=True, output_kind=delta, **sampling)
        sent, frames, text = time.monotonic(), [], []
        request = TokensPrompt(prompt_token_ids=prompt.token_ids)
        async for output in llm.generate(request, params, f"bench-{os.urandom(8).hex()}"):
            if output.outputs[0].token_ids:
                frames.append(time.monotonic())
                text.append(output.outputs[0].text)
        history += [HistoryTurn("user", question), HistoryTurn("assistant", "".join(text))]
        first, last = (frames[0], frames[-1]) if frames else (None, None)
        turns.append(Turn(sent, first, last, tuple(frames), tokens))
    return turns
