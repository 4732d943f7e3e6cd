"""The plan: settings that passed the checks before loading, with the model's shape and
the machine they were checked against, and the defaults that follow from them (engine
cores, workers per core, the memory share, the dtype).

Usage::

    plan = preflight(settings)              # engine.plan.preflight: the checks
    plan.engines, plan.workers, plan.placement, plan.batch, plan.memory_share, plan.sources()
    plan.alone()                            # the same plan for one process
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from engine.model.files import ModelShape
from engine.model.memory import CPU_MEMORY_SHARE, DEFAULT_BLOCK_SIZE, DTYPE_BYTES, GiB
from engine.plan.batch import Batch, batch_for
from engine.plan.placement import (
    CORES_PER_GPU,
    CPUS_PER_CORE,
    ENGINE_MARGIN_GIB,
    SMALL_MODEL_SHARE,
    Placement,
    weights_gib,
)
from engine.vllm_door.hardware import Hardware
from settings.profiles import PROFILES
from settings.settings import Settings

__all__ = [
    "GPU_STREAM_INTERVAL",
    "Plan",
    "ReplySlots",
    "core_tokens",
    "default_engines",
    "holds",
    "reply_slots",
]

# Tokens a reply gathers in its engine on a GPU before a worker takes them: a worker's CPU
# per output, not the GPU, set the knee (docs/scaling.md), and at a token every 2-15 ms
# four stay inside one of the app's 50 ms frames. The first token still goes at once.
GPU_STREAM_INTERVAL = 4


@dataclass(frozen=True)
class Plan:
    """Settings that passed the checks, with what they were checked against."""

    settings: Settings
    shape: ModelShape | None  # None: the config could not be read before loading
    hardware: Hardware

    @property
    def dtype(self) -> str:
        """The dtype the weights and the KV cache will have."""
        if self.settings.dtype != "auto":
            return self.settings.dtype
        own = self.shape.dtype if self.shape else "bfloat16"
        return own if own in DTYPE_BYTES else "bfloat16"

    @property
    def block_size(self) -> int:
        return self.settings.block_size or DEFAULT_BLOCK_SIZE[self.hardware.backend]

    @property
    def memory_share(self) -> float:
        """The memory share vLLM gets: the explicit setting, else the profile's on a GPU,
        else the CPU backend's (a profile's GPU share of RAM would not be free)."""
        if self.settings.gpu_memory_utilization is not None:
            return self.settings.gpu_memory_utilization
        if self.hardware.cpu:
            return CPU_MEMORY_SHARE
        return PROFILES[self.settings.profile].gpu_memory_utilization

    @property
    def engines(self) -> int:
        """Engine cores (``ERNIE_ENGINES``); unset: ``default_engines`` below."""
        return self.settings.engines or default_engines(self)[0]

    def alone(self) -> Plan:
        """This plan for an engine in the app's own process (``chainlit run``, or
        ``python -m serve`` with one worker and one core): one core, one worker."""
        if self.settings.engines == 1 and self.settings.workers == 1:
            return self
        settings = self.settings.with_values("one process", engines=1, workers=1)
        return replace(self, settings=settings)

    @property
    def placement(self) -> Placement:
        return Placement.of(self.settings, self.hardware, self.engines)

    @property
    def batch(self) -> Batch:
        """Each engine core's batch (``engine.plan.batch``: the device, the profile,
        its KV cache)."""
        tokens = core_tokens(self, self.engines)
        return batch_for(self.hardware, profile=self.settings.profile, kv_tokens=tokens,
                         settings=self.settings)  # fmt: skip

    @property
    def chats_at_once(self) -> int:
        """Replies the engine cores run at once, all together."""
        return self.batch.max_num_seqs * self.engines

    @property
    def workers(self) -> int:
        """Web front ends per engine core (``ERNIE_WORKERS``): unset, 1 on the CPU (its
        engine is the bottleneck) and on a GPU one per 4 CPU cores over the engine cores,
        at least 2 where a core has 4 CPU cores (the measured best: docs/scaling.md), at
        most 4 (one engine core caps them)."""
        if self.settings.workers is not None:
            return self.settings.workers
        cpus = self.hardware.cpus // self.engines
        return 1 if self.hardware.cpu or cpus < 4 else min(4, max(2, cpus // 4))

    @property
    def replies(self) -> ReplySlots:
        """Each engine core's share of the web app's cap on replies and of its line."""
        return reply_slots(self.settings, self.chats_at_once, self.engines)

    @property
    def stream_interval(self) -> int:
        """Tokens a reply gathers before the web app takes them (``ERNIE_STREAM_INTERVAL``;
        unset: 1 on the CPU, ``GPU_STREAM_INTERVAL`` on a GPU)."""
        if self.settings.stream_interval is not None:
            return self.settings.stream_interval
        return 1 if self.hardware.cpu else GPU_STREAM_INTERVAL

    @property
    def cuda_graph_max(self) -> int | None:
        """The largest batch a core runs as a CUDA graph (``ERNIE_CUDA_GRAPH_MAX``; unset:
        its whole batch, where vLLM stops at 512); None: no graphs (the CPU, eager)."""
        if self.hardware.cpu or self.settings.enforce_eager:
            return None
        return self.settings.cuda_graph_max or self.batch.max_num_seqs

    def sources(self) -> dict[str, str]:
        """Where each value came from, with unset ones credited to whoever picks them."""
        settings = self.settings
        sources = settings.origins
        if settings.dtype == "auto":
            sources["dtype"] = "the model's own"
        for name, source in sources.items():
            if getattr(settings, name) is not None:
                continue
            if name == "workers":
                cpus = f"{self.hardware.cpus} CPU cores"
                sources[name] = "CPU backend default" if self.hardware.cpu else cpus
            elif name == "engines":
                sources[name] = default_engines(self)[1]
            elif name == "stream_interval":
                sources[name] = "CPU backend default" if self.hardware.cpu else "GPU default"
            elif name == "cuda_graph_max":
                sources[name] = "no CUDA graphs" if self.cuda_graph_max is None else "the batch"
            elif name == "gpu_memory_utilization":
                sources[name] = (
                    "CPU backend default" if self.hardware.cpu else f"profile {settings.profile}"
                )
            elif source == "default":
                sources[name] = "backend default"
        return sources | self.batch.sources


@dataclass(frozen=True)
class ReplySlots:
    """The replies one engine core's web workers write at once (the app's cap) and the
    messages that may wait for one (its line), with where each came from."""

    slots: int
    line: int
    sources: tuple[str, str]


def reply_slots(settings: Settings, chats_at_once: int, cores: int = 1) -> ReplySlots:
    """The one place the cap and the line are sized: ``ERNIE_MAX_REPLIES`` (unset: twice
    what the cores batch at once, ``chats_at_once``) and ``ERNIE_MAX_WAITING`` (unset: as
    many), each shared evenly by the ``cores``."""
    slots = settings.max_replies or 2 * chats_at_once
    line = slots if settings.max_waiting is None else settings.max_waiting
    given = settings.max_replies is not None, settings.max_waiting is not None
    sources = (
        "ERNIE_MAX_REPLIES given" if given[0] else f"twice the {chats_at_once} chats batched",
        "ERNIE_MAX_WAITING given" if given[1] else "as many waiting",
    )
    return ReplySlots(math.ceil(slots / cores), math.ceil(line / cores), sources)


# --- the engine cores' default ----------------------------------------------------
def _core_kv_gib(plan: Plan, placement: Placement) -> float | None:
    """Each core's KV cache (GiB) with this placement; None when it cannot be told."""
    settings, hardware = plan.settings, plan.hardware
    if settings.kv_cache_gb is not None:
        return placement.kv_cache_gib(settings.kv_cache_gb)
    weights = weights_gib(plan.shape, plan.dtype)
    if hardware.cpu or weights is None:
        return None
    core_gib = placement.share(plan.memory_share) * _device_gib(hardware)
    return core_gib - weights / placement.per_copy - ENGINE_MARGIN_GIB


def _device_gib(hardware: Hardware) -> float:
    """The smallest visible GPU's memory: every core's share is cut from it."""
    return min(g.total_bytes for g in hardware.gpus) / GiB


def core_tokens(plan: Plan, count: int) -> int | None:
    placement = Placement.of(plan.settings, plan.hardware, count)
    kv = _core_kv_gib(plan, placement)
    if kv is None or plan.shape is None:
        return None
    per_token = plan.shape.kv_bytes_per_token(plan.dtype, plan.settings.tensor_parallel_size)
    return max(0, int(kv * GiB) // per_token)


def default_engines(plan: Plan) -> tuple[int, str]:
    """``ERNIE_ENGINES`` when unset, and why (the capacity report's source line)."""
    settings, hardware = plan.settings, plan.hardware
    if hardware.cpu or settings.engine == "remote":
        return 1, "default: one core"
    weights = weights_gib(plan.shape, plan.dtype)
    if weights is None:
        return 1, "default: one core (the model's size is unknown)"
    one, device_gib = Placement.of(settings, hardware, 1), _device_gib(hardware)
    if weights / one.per_copy > SMALL_MODEL_SHARE * device_gib:
        return 1, "default: one core (the model is not small beside its GPU)"
    wanted = min(CORES_PER_GPU * one.groups, hardware.cpus // CPUS_PER_CORE)
    fits = [k for k in range(2, wanted + 1) if holds(plan, core_tokens(plan, k))]
    if not fits:
        return 1, f"default: one core ({hardware.cpus} CPU cores, or no room for two)"
    small = f"{weights:.2f} GiB on {one.groups} x {device_gib:.0f} GiB GPU"
    return fits[-1], f"default: cores a GPU for a small model ({small}; docs/scaling.md)"


def holds(plan: Plan, tokens: int | None) -> bool:
    """A core with KV room for ``tokens`` (None: unknown before loading) holds one request
    of ``ERNIE_MAX_MODEL_LEN``."""
    return tokens is None or tokens >= plan.settings.max_model_len
