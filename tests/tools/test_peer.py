"""The bench's ``vllm`` path (``bench.peer``): ``vllm serve`` started with vLLM's own
defaults, driven over its OpenAI API with streamed replies. Driven here against the
session's ``vllm serve`` (the same served name, the same protocol)."""

from __future__ import annotations

from dataclasses import replace

import httpx
import pytest

from bench.peer import peer_flags
from bench.raw_engine import OLD_CAP
from bench.talk import openai_conversation
from bench.traffic import Conversation
from engine.model.files import ModelShape
from engine.plan.plan import Plan
from engine.vllm_door.hardware import Gpu, Hardware
from testing.demo import hermetic_settings
from testing.servers import Server

GiB = 1 << 30


def h200_plan(**values: object) -> Plan:
    gpu = Gpu("NVIDIA H200", 140 * GiB, 139 * GiB, (9, 0))
    hardware = Hardware("gpu", (gpu,), 256 * GiB, 200 * GiB, ("bfloat16",), cpus=16)
    shape = ModelShape(131072, 16, 2, 18, 128, "bfloat16", parameters=361_821_120)
    return Plan(hermetic_settings(**values), shape, hardware)


def test_the_peer_gets_the_model_context_and_memory_and_nothing_else() -> None:
    """What an operator would type: no batch, no block size, vLLM sizes the rest itself."""
    flags = peer_flags(h200_plan(model="/m", load_format="dummy", max_num_seqs=64))
    assert flags == [
        "--model", "/m", "--max-model-len", "16384", "--gpu-memory-utilization", "0.9",
        "--load-format", "dummy",
    ]  # fmt: skip


def test_the_old_cap_is_the_batch_the_app_gave_one_engine_before() -> None:
    plan = h200_plan().alone()  # the engine path: one core in the bench's process
    assert plan.batch.max_num_seqs == 1024  # the device's now
    old = OLD_CAP(replace(plan)).batch
    assert (old.max_num_seqs, old.max_num_batched_tokens) == (256, 2048)


@pytest.mark.engine
async def test_a_conversation_streams_over_the_openai_api(vllm_server: Server) -> None:
    talk = Conversation(0, 0.0, 24, ("你好", "再来"), (0.0,))
    async with httpx.AsyncClient(timeout=60) as client:
        turns = await openai_conversation(client, vllm_server.url, "你是一个助手。", talk)
    assert [turn.error for turn in turns] == [None, None]
    for turn in turns:
        assert turn.answered and turn.tokens == 24 and len(turn.frame_at) > 1  # streamed
        assert turn.ttft_s > 0 and turn.per_token_s > 0
