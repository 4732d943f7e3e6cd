"""Each engine core's batch from the device, the profile and its KV cache
(``engine.plan.batch``), with the facts of an H200, a B200, an A100, a 24 GB card
and the CPU given to the plan (no GPU here). The product's in-process engine got 128
sequences a core on an H200 (256 over two cores), where ``vllm serve`` alone gets 1,024."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from engine.engine_args import build_engine_args
from engine.model.files import ModelShape
from engine.plan.plan import Plan
from engine.plan.preflight import check_plan
from engine.vllm_door.hardware import Gpu, Hardware
from settings.settings import SettingsError
from testing.demo import hermetic_settings

GiB = 1 << 30
ERNIE_03B = ModelShape(131072, 16, 2, 18, 128, "bfloat16", parameters=361_821_120)


def machine(name: str, gib: int, gpus: int = 1, cpus: int = 16) -> Hardware:
    gpu = Gpu(name, total_bytes=gib * GiB, free_bytes=(gib - 1) * GiB, capability=(9, 0))
    return Hardware("gpu", (gpu,) * gpus, 256 * GiB, 200 * GiB, ("bfloat16",), cpus=cpus)


def plan_on(hardware: Hardware, **values: object) -> Plan:
    return Plan(hermetic_settings(**values), ERNIE_03B, hardware)


@pytest.mark.parametrize(
    ("gpu", "gib", "seqs", "tokens", "row"),
    [
        ("NVIDIA H200", 140, 1024, 8192, "a GPU of 70 GiB or more, not an A100 (NVIDIA H200)"),
        ("NVIDIA B200", 180, 1024, 16384, "a GPU of 160 GiB or more"),
        ("NVIDIA A100-SXM4-80GB", 80, 256, 2048, "NVIDIA A100-SXM4-80GB, 80 GiB"),
        ("NVIDIA GeForce RTX 4090", 24, 256, 2048, "NVIDIA GeForce RTX 4090, 24 GiB"),
    ],
)
def test_each_core_gets_what_vllm_gives_a_server_alone_on_its_device(
    gpu: str, gib: int, seqs: int, tokens: int, row: str
) -> None:
    plan = plan_on(machine(gpu, gib), engines=2)  # two cores: each KV cache holds the row
    batch = plan.batch
    assert (batch.max_num_seqs, batch.max_num_batched_tokens) == (seqs, tokens)
    sources = plan.sources()
    assert sources["max_num_seqs"] == f"vLLM's batch for {row}, x 1 for the profile balanced"
    assert sources["max_num_batched_tokens"] == f"vLLM's batch for {row}, x 1"
    assert plan.chats_at_once == seqs * plan.engines  # each core its own, not a share


def test_several_cores_on_an_h200_hold_more_chats_than_one() -> None:
    two = plan_on(machine("NVIDIA H200", 140), engines=2)
    assert two.batch.max_num_seqs == 1024 and two.chats_at_once == 2048  # not one split
    four = plan_on(machine("NVIDIA H200", 140))  # the default on 16 CPUs: four cores
    assert four.engines == 4 and four.batch.max_num_seqs == 868  # what a quarter holds
    assert four.chats_at_once == 3472


def test_the_cpu_backend_keeps_its_batch() -> None:
    cpu = Hardware("cpu", (), 24 * GiB, 20 * GiB, ("bfloat16",), cpus=2)
    plan = Plan(hermetic_settings(), ERNIE_03B, cpu)
    assert (plan.batch.max_num_seqs, plan.batch.max_num_batched_tokens) == (256, None)
    assert plan.sources()["max_num_seqs"] == "the CPU backend's, x 1 for the profile balanced"
    assert plan.sources()["max_num_batched_tokens"] == "vLLM's own"
    long = Plan(hermetic_settings(profile="long-context"), ERNIE_03B, cpu)
    assert long.batch.max_num_seqs == 32  # the profiles' old CPU numbers: 512, 256, 32
    assert (
        Plan(hermetic_settings(profile="high-concurrency"), ERNIE_03B, cpu).batch.max_num_seqs
        == 512
    )


def test_the_profiles_scale_the_device_batch() -> None:
    h200 = machine("NVIDIA H200", 140)
    busy = plan_on(h200, profile="high-concurrency", engines=1).batch
    assert (busy.max_num_seqs, busy.max_num_batched_tokens) == (2048, 16384)
    halves = plan_on(h200, profile="high-concurrency", engines=2)  # half the KV cache each
    assert halves.batch.max_num_seqs == 1786  # 3.6M tokens a core: 1,786 chats of 2,000
    long = plan_on(h200, profile="long-context").batch
    assert (long.max_num_seqs, long.max_num_batched_tokens) == (128, 8192)


def test_the_kv_cache_caps_the_batch() -> None:
    """0.05 of an H200 for one core: about 5.3 GiB of KV cache, 310k tokens, 155 chats of
    2,000 tokens: fewer than vLLM's 1,024, and the batch says so."""
    plan = plan_on(machine("NVIDIA H200", 140), engines=1, gpu_memory_utilization=0.05)
    assert plan.batch.max_num_seqs == 155
    assert plan.sources()["max_num_seqs"].startswith("what the core's KV cache holds")


def test_an_explicit_batch_wins_and_is_checked_against_the_kv_cache() -> None:
    h200 = machine("NVIDIA H200", 140)
    given = plan_on(h200, max_num_seqs=64, max_num_batched_tokens=4096)
    assert (given.batch.max_num_seqs, given.batch.max_num_batched_tokens) == (64, 4096)
    assert given.sources()["max_num_seqs"] == "given"
    held = check_plan(plan_on(h200, engines=2, max_num_seqs=1500))  # half the KV cache holds it
    assert held.batch.max_num_seqs == 1500
    with pytest.raises(SettingsError) as refused:
        check_plan(plan_on(h200, engines=1, gpu_memory_utilization=0.05, max_num_seqs=1024))
    line = str(refused.value)
    assert line.startswith("ERNIE_MAX_NUM_SEQS=1024: each engine core's KV cache holds about")
    assert "155 chats of 2,000" in line and "use at most 155" in line and "\n" not in line


def test_an_unknown_model_size_leaves_the_device_batch() -> None:
    plan = Plan(
        hermetic_settings(), replace(ERNIE_03B, parameters=None), machine("NVIDIA H200", 140)
    )
    assert plan.batch.max_num_seqs == 1024  # no KV estimate before loading: vLLM's row


def test_a_gpu_core_gathers_tokens_and_runs_its_whole_batch_as_graphs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """#52's levers as the default start on an H100 measured them (docs/scaling.md): each
    reply's tokens reach the web app four at a time, and CUDA graphs cover the core's whole
    batch (vLLM stops at 512); the CPU backend keeps vLLM's own; a setting wins."""
    for name in ("VLLM_WORKER_MULTIPROC_METHOD", "VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS"):
        monkeypatch.setenv(name, os.environ.get(name, "spawn" if "METHOD" in name else "12"))
    h100 = plan_on(machine("NVIDIA H100 80GB HBM3", 80), engines=2)  # 995 chats a core
    args = build_engine_args(h100)
    assert args.stream_interval == 4 and h100.sources()["stream_interval"] == "GPU default"
    assert args.max_cudagraph_capture_size == h100.batch.max_num_seqs > 512
    assert h100.sources()["cuda_graph_max"] == "the batch"
    given = build_engine_args(plan_on(machine("NVIDIA H100", 80), stream_interval=1,
                                      cuda_graph_max=512))  # fmt: skip
    assert (given.stream_interval, given.max_cudagraph_capture_size) == (1, 512)
    eager = build_engine_args(plan_on(machine("NVIDIA H100", 80), enforce_eager=True))
    assert eager.max_cudagraph_capture_size is None
    cpu = Plan(
        hermetic_settings(), ERNIE_03B, Hardware("cpu", (), 24 * GiB, 20 * GiB, ("bfloat16",))
    )
    assert (cpu.stream_interval, cpu.cuda_graph_max) == (1, None)
    assert cpu.sources()["stream_interval"] == "CPU backend default"


def test_the_cap_on_replies_and_the_line_are_sized_in_one_place_from_the_plan() -> None:
    """``Plan.replies``: twice what the cores batch, each core its share; the settings win;
    the web app takes what the launcher hands it (``chat.open_app``)."""
    four = plan_on(machine("NVIDIA H100 80GB HBM3", 80))  # 4 cores of 475 chats each
    replies = four.replies
    assert (replies.slots, replies.line) == (2 * 475, 2 * 475)  # 2 x 1,900 over 4 cores
    assert replies.sources == ("twice the 1900 chats batched", "as many waiting")
    given = plan_on(machine("NVIDIA H100", 80), max_replies=1000, max_waiting=0).replies
    assert (given.slots, given.line) == (250, 0)
    assert given.sources == ("ERNIE_MAX_REPLIES given", "ERNIE_MAX_WAITING given")
    alone = plan_on(machine("NVIDIA H100", 80)).alone().replies  # one process, one core
    assert alone.slots == 2 * plan_on(machine("NVIDIA H100", 80)).alone().chats_at_once
