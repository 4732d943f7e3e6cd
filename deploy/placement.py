"""``ERNIE_ENGINES=K``: where K engine cores run and what each one gets.

A small model leaves one GPU mostly idle: one engine core's own loop on one CPU core is
the limit (docs/scaling.md). K cores, each with its own workers, serve more. The cores
take the GPUs in turn (``tensor x pipeline`` GPUs each); cores on the same device split
its memory share and its KV cache evenly, and the batch (``max_num_seqs``) is split over
all of them, so K cores hold as many chats at once as one did.

Usage::

    cores = plan.placement          # Placement.of(settings, hardware, K)
    cores.count, cores.per_device, cores.devices(i), cores.share(0.9), cores.max_num_seqs
    check_placement(plan)           # SettingsError: K cannot fit (one line, the fix)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .model_files import refuse
from .names import env_name
from .sizing import DTYPE_BYTES, GiB

if TYPE_CHECKING:
    from .hardware import Hardware
    from .model_files import ModelShape
    from .preflight import Plan
    from .settings import Settings

__all__ = ["Placement", "check_placement", "default_engines", "weights_gib"]

ENGINE_MARGIN_GIB = 1.0  # activations, CUDA graphs and the runtime beside the weights
# The default: two cores a GPU for a model whose weights take at most this share of it (the
# 0.3B model on one H200: 0.5%), with this many CPU cores per engine core (a core, its
# workers and room: two cores on 16 CPUs measured faster than one at 256 chats, three
# slower; docs/scaling.md).
SMALL_MODEL_SHARE = 0.02
CPUS_PER_CORE = 6


def weights_gib(shape: ModelShape | None, dtype: str) -> float | None:
    """The weights' size estimated from the model's config; None when unknown."""
    if shape is None or shape.parameters is None:
        return None
    return shape.parameters * DTYPE_BYTES.get(dtype, 2) / GiB


@dataclass(frozen=True)
class Placement:
    """K engine cores over the visible GPUs (or the one CPU device)."""

    count: int
    gpus: int  # visible GPUs; 0 on the CPU
    per_copy: int  # GPUs one core takes (tensor x pipeline)
    total_seqs: int  # ERNIE_MAX_NUM_SEQS: over all the cores

    @classmethod
    def of(cls, settings: Settings, hardware: Hardware, count: int) -> Placement:
        per_copy = settings.tensor_parallel_size * settings.pipeline_parallel_size
        return cls(count, len(hardware.gpus), per_copy, settings.max_num_seqs)

    @property
    def groups(self) -> int:
        """Model copies the devices hold side by side (sets of GPUs; the CPU is one)."""
        return max(1, self.gpus // self.per_copy)

    @property
    def per_device(self) -> int:
        """Cores sharing one device (its memory share and KV cache split as many ways)."""
        return math.ceil(self.count / self.groups)

    @property
    def max_num_seqs(self) -> int:
        """Each core's batch: the total split over the cores, rounded up."""
        return math.ceil(self.total_seqs / self.count)

    def share(self, memory_share: float) -> float:
        """Each core's share of its device's memory."""
        return round(memory_share / self.per_device, 4)

    def kv_cache_gib(self, device_gib: float) -> float:
        """Each core's KV cache when its device's (``ERNIE_KV_CACHE_GB``) is split."""
        return device_gib / self.per_device

    def devices(self, core: int) -> str | None:
        """``CUDA_VISIBLE_DEVICES`` for core ``core``; None: all cores see the same GPUs."""
        if self.groups == 1:
            return None
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = visible.split(",") if visible else [str(i) for i in range(self.gpus)]
        first = (core % self.groups) * self.per_copy
        return ",".join(ids[first : first + self.per_copy])


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


def _core_tokens(plan: Plan, count: int) -> int | None:
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
    wanted = min(2 * one.groups, hardware.cpus // CPUS_PER_CORE, settings.max_num_seqs)
    fits = [k for k in range(2, wanted + 1) if _holds(plan, _core_tokens(plan, k))]
    if not fits:
        return 1, f"default: one core ({hardware.cpus} CPU cores, or no room for two)"
    small = f"{weights:.2f} GiB on {one.groups} x {device_gib:.0f} GiB GPU"
    return fits[-1], f"default: two cores a GPU for a small model ({small}; docs/scaling.md)"


def _holds(plan: Plan, tokens: int | None) -> bool:
    """A core with KV room for ``tokens`` (None: unknown before loading) holds one request
    of ``ERNIE_MAX_MODEL_LEN``."""
    return tokens is None or tokens >= plan.settings.max_model_len


def check_placement(plan: Plan) -> None:
    """Refuse K engine cores that cannot run: one line naming ERNIE_ENGINES and a fix."""
    settings, count = plan.settings, plan.engines
    if count == 1:
        return
    if settings.engine == "remote":
        raise refuse("engines", count, "the remote servers run the engines", "unset it")
    if count > settings.max_num_seqs:
        why = f"each core needs a request of {env_name('max_num_seqs')}={settings.max_num_seqs}"
        raise refuse("engines", count, why, f"use at most {settings.max_num_seqs}")
    tokens = _core_tokens(plan, count)
    if _holds(plan, tokens):
        return
    fits = [k for k in range(1, count) if _holds(plan, _core_tokens(plan, k))]
    raise refuse(
        "engines",
        count,
        f"each core's share of memory leaves room for about {tokens:,} tokens of KV cache, "
        f"fewer than one request of {env_name('max_model_len')}={settings.max_model_len}",
        f"use {fits[-1] if fits else 1}, or lower {env_name('max_model_len')}",
    )
