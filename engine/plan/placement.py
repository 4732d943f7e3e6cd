"""``ERNIE_ENGINES=K``: where K engine cores run and what each one gets.

A small model leaves one GPU mostly idle: one engine core's own loop on one CPU core is
the limit (docs/scaling.md). K cores, each with its own workers, serve more. The cores
take the GPUs in turn (``tensor x pipeline`` GPUs each); cores on the same device split
its memory share and its KV cache evenly; each core gets a batch of its own
(``engine.plan.batch``), so K cores hold K times the chats of one.

Usage::

    cores = plan.placement          # Placement.of(settings, hardware, K)
    cores.count, cores.per_device, cores.devices(i), cores.share(0.9)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.model.memory import DTYPE_BYTES, GiB

if TYPE_CHECKING:
    from engine.model.files import ModelShape
    from engine.vllm_door.hardware import Hardware
    from settings.settings import Settings

__all__ = [
    "CORES_PER_GPU",
    "CPUS_PER_CORE",
    "ENGINE_MARGIN_GIB",
    "SMALL_MODEL_SHARE",
    "Placement",
    "weights_gib",
]

ENGINE_MARGIN_GIB = 1.0  # activations, CUDA graphs and the runtime beside the weights
# The default: up to CORES_PER_GPU cores a GPU for a model whose weights take at most this
# share of it (the 0.3B model on one H200: 0.5%), with this many CPU cores per engine core
# (a core and its two workers: on an H100 with 16 CPUs, four cores held the SLO at 400 new
# chats a second where two failed at 300; docs/scaling.md).
SMALL_MODEL_SHARE = 0.02
CORES_PER_GPU = 4
CPUS_PER_CORE = 4


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

    @classmethod
    def of(cls, settings: Settings, hardware: Hardware, count: int) -> Placement:
        per_copy = settings.tensor_parallel_size * settings.pipeline_parallel_size
        return cls(count, len(hardware.gpus), per_copy)

    @property
    def groups(self) -> int:
        """Model copies the devices hold side by side (sets of GPUs; the CPU is one)."""
        return max(1, self.gpus // self.per_copy)

    @property
    def per_device(self) -> int:
        """Cores sharing one device (its memory share and KV cache split as many ways)."""
        return math.ceil(self.count / self.groups)

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
