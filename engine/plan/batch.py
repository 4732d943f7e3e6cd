"""Each engine core's batch: the sequences it runs at once and the tokens it takes a step,
sized from the device, the profile and the core's KV cache.

vLLM sizes a server alone on its device (``EngineArgs.get_batch_defaults``, the same table
in 0.26 and 0.29): on a GPU of 160 GiB or more 1,024 sequences and 16,384 tokens a step;
of 70 GiB or more but an A100, 1,024 and 8,192 (its OpenAI server's); on other GPUs 256
and 2,048. The app's in-process ``AsyncLLM`` is no server to that table (its usage context
is the engine's), so it would get vLLM's scheduler defaults, 128 and 2,048, whatever the
GPU: the batch is set here instead, for every core, from:

1. ``ERNIE_MAX_NUM_SEQS`` and ``ERNIE_MAX_NUM_BATCHED_TOKENS`` when set (each core's);
2. else the device's row of that table, times the profile's factor (``high-concurrency``:
   twice, as vLLM's own throughput mode; ``balanced``: as vLLM; ``long-context``: an
   eighth, as long chats fill the KV cache sooner); the CPU backend keeps what serves it
   (256 sequences, vLLM's tokens);
3. no more sequences than the core's KV cache holds chats of ``TYPICAL_CHAT_TOKENS``
   (known before loading on a GPU: ``engine.plan.plan.core_tokens``), and at least one.

An explicit ``ERNIE_MAX_NUM_SEQS`` the KV cache cannot hold that many chats of is refused
before loading (``engine.plan.preflight``), in one line.

Usage::

    batch = batch_for(hardware, profile="balanced", kv_tokens=3_400_000, settings=settings)
    batch.max_num_seqs, batch.max_num_batched_tokens, batch.sources
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.model.memory import GiB
from settings.profiles import PROFILES

if TYPE_CHECKING:
    from engine.vllm_door.hardware import Gpu, Hardware
    from settings.settings import Settings

__all__ = ["CPU_SEQS", "TYPICAL_CHAT_TOKENS", "Batch", "batch_for", "device_batch"]

TYPICAL_CHAT_TOKENS = 2000  # a few exchanges of history plus a reply
CPU_SEQS = 256  # the CPU backend's batch (docs/scaling.md: more only queues on its cores)


@dataclass(frozen=True)
class Batch:
    """One core's batch, and where each value came from (the capacity report's)."""

    max_num_seqs: int
    max_num_batched_tokens: int | None  # None: vLLM's own (the CPU backend)
    seqs_from: str
    tokens_from: str

    @property
    def sources(self) -> dict[str, str]:
        return {"max_num_seqs": self.seqs_from, "max_num_batched_tokens": self.tokens_from}


def _gpu_row(gpu: Gpu) -> tuple[int, int, str]:
    """vLLM's server row for one GPU: sequences, tokens a step, and the row's name."""
    gib = gpu.total_bytes / GiB
    if gib >= 160:
        return 1024, 16384, "a GPU of 160 GiB or more"
    if gib >= 70 and "a100" not in gpu.name.lower():
        return 1024, 8192, f"a GPU of 70 GiB or more, not an A100 ({gpu.name})"
    return 256, 2048, f"{gpu.name}, {gib:.0f} GiB"


def device_batch(hardware: Hardware) -> tuple[int, int | None, str]:
    """What vLLM gives a server alone on this machine's device (the smallest visible GPU:
    every core's batch must fit on it)."""
    if hardware.cpu:
        return CPU_SEQS, None, "the CPU backend's"
    smallest = min(hardware.gpus, key=lambda gpu: gpu.total_bytes)
    seqs, tokens, row = _gpu_row(smallest)
    return seqs, tokens, f"vLLM's batch for {row}"


def batch_for(
    hardware: Hardware, *, profile: str, kv_tokens: int | None, settings: Settings
) -> Batch:
    """One core's batch by the rules above; ``kv_tokens``: its KV cache (None: unknown)."""
    seqs, tokens, row = device_batch(hardware)
    factor = PROFILES[profile].batch_factor
    seqs_from = f"{row}, x {factor:g} for the profile {profile}"
    seqs = max(1, int(seqs * factor))
    if kv_tokens is not None and kv_tokens // TYPICAL_CHAT_TOKENS < seqs:
        seqs = max(1, kv_tokens // TYPICAL_CHAT_TOKENS)
        seqs_from = f"what the core's KV cache holds: chats of {TYPICAL_CHAT_TOKENS:,} tokens"
    tokens_from = "vLLM's own" if tokens is None else f"{row}, x {max(1.0, factor):g}"
    if tokens is not None:
        tokens = int(tokens * max(1.0, factor))  # a shorter batch still takes long prompts
    if settings.max_num_seqs is not None:
        seqs, seqs_from = settings.max_num_seqs, settings.origins["max_num_seqs"]
    if settings.max_num_batched_tokens is not None:
        tokens = settings.max_num_batched_tokens
        tokens_from = settings.origins["max_num_batched_tokens"]
    return Batch(seqs, tokens, seqs_from, tokens_from)
