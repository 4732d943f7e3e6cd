"""The capacity report agrees with what vLLM itself reports, on the real CPU engine."""

from __future__ import annotations

import re
import subprocess

import pytest

from engine.model.memory import GiB
from testing.demo import ENGINE_SETTINGS
from testing.engines import RunningEngine

pytestmark = pytest.mark.engine


def test_report_matches_the_engine_and_the_arithmetic(running: RunningEngine) -> None:
    engine = running.engine
    report, cache = engine.capacity, engine.backend.llm.vllm_config.cache_config  # type: ignore[attr-defined]
    assert report.backend == "cpu" and report.attention_backend == "CPU_ATTN"
    assert report.kv_cache_blocks == cache.num_gpu_blocks
    assert report.kv_cache_tokens == cache.kv_cache_size_tokens
    # The preflight arithmetic (used to name the largest max_model_len that fits) is vLLM's:
    assert engine.plan.shape is not None
    per_token = engine.plan.shape.kv_bytes_per_token(report.dtype)
    expected_blocks = int(ENGINE_SETTINGS["kv_cache_gb"] * GiB) // (report.block_size * per_token)
    assert report.kv_cache_blocks == expected_blocks
    assert report.full_length_requests == pytest.approx(
        report.kv_cache_tokens / report.max_model_len, rel=0.01
    )
    assert report.typical_chats == min(report.max_num_seqs, expected_blocks // 16)  # 2000 tokens
    assert report.settings["kv_cache_gb"] == {"value": 0.5, "from": "given"}
    scheduler = engine.backend.llm.vllm_config.scheduler_config  # type: ignore[attr-defined]
    assert report.max_num_batched_tokens == scheduler.max_num_batched_tokens
    assert report.settings["max_num_seqs"] == {"value": 32, "from": "given"}
    assert report.settings["max_num_batched_tokens"]["from"] == "vLLM's own"  # the CPU's
    at_once = report.as_dict()["chats_at_once"]  # what /readyz says, and why
    assert at_once == {"each_core": report.typical_chats, "all_cores": report.typical_chats,
                       "batch_from": "given"}  # fmt: skip
    assert report.weights_gib is not None and 0 < report.weights_gib < 0.1


def test_check_load_prints_the_kv_capacity_vllm_logs(
    load_checks: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    """Sized by memory share (not an explicit size), so only vLLM knows the number."""
    result = load_checks["sized by share"]
    assert result.returncode == 0, result.stderr[-2000:]
    logged = re.search(r"KV cache size: ([\d,]+) tokens", result.stdout)
    ours = re.search(
        r"^KV cache: [\d.]+ GiB, ([\d,]+) tokens in [\d,]+ blocks of \d+$", result.stdout, re.M
    )
    assert logged and ours, result.stdout[-3000:]
    assert ours.group(1) == logged.group(1)
    assert re.search(r"^backend: CPU on CPU .*attention CPU_ATTN, bfloat16$", result.stdout, re.M)
    assert "ERNIE_GPU_MEMORY_UTILIZATION=0.08 (environment)" in result.stdout
    assert "ERNIE_MAX_MODEL_LEN=16384 (profile balanced)" in result.stdout
