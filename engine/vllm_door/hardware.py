"""The machine as vLLM will see it: backend, GPUs, memory, the dtypes it computes in.

``Hardware.probe()`` looks without creating a CUDA context (vLLM forks after it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from engine.model.memory import GiB
from engine.vllm_door.internals import cpu_memory_node
from engine.vllm_door.internals import nvml as vllm_nvml

__all__ = ["MIN_BF16_CAPABILITY", "Gpu", "Hardware", "driver_problem"]

MIN_BF16_CAPABILITY = (8, 0)
# The oldest Linux driver series each CUDA major version runs on (NVIDIA's CUDA
# compatibility table); an older driver fails deep inside torch.
MIN_DRIVER = {12: 525, 13: 580}


@dataclass(frozen=True)
class Gpu:
    name: str
    total_bytes: int
    free_bytes: int
    capability: tuple[int, int]


@dataclass(frozen=True)
class Hardware:
    """The machine as vLLM will see it."""

    backend: str  # "cpu" or "gpu"
    gpus: tuple[Gpu, ...]
    ram_total_bytes: int
    ram_available_bytes: int
    dtypes: tuple[str, ...]  # the dtypes the device computes in
    driver: str | None = None  # the NVIDIA driver's version, on a GPU host
    cuda: str | None = None  # the CUDA version torch was built for ("13.0")
    cpus: int = field(default_factory=lambda: os.cpu_count() or 1)

    @property
    def cpu(self) -> bool:
        return self.backend == "cpu"

    @property
    def device(self) -> str:
        if self.cpu:
            memory = self.ram_total_bytes / GiB
            return f"CPU ({os.cpu_count()} cores, {memory:.1f} GiB on its memory node)"
        names = sorted({gpu.name for gpu in self.gpus})
        return f"{len(self.gpus)} x {', '.join(names)}"

    @classmethod
    def probe(cls) -> Hardware:
        """Look at the machine without creating a CUDA context (vLLM forks after this)."""
        import psutil
        from vllm.platforms import current_platform

        if current_platform.is_cpu():
            # The memory node vLLM's CPU worker reserves from, read the way it reads it.
            total, available = cpu_memory_node()
            dtypes = tuple(str(d).removeprefix("torch.") for d in current_platform.supported_dtypes)
            return cls("cpu", (), total, available, dtypes)
        memory = psutil.virtual_memory()
        gpus = tuple(
            _probe_gpu(current_platform, i) for i in range(current_platform.device_count())
        )
        bf16 = bool(gpus) and all(g.capability >= MIN_BF16_CAPABILITY for g in gpus)
        dtypes = ("bfloat16", "float16", "float32") if bf16 else ("float16", "float32")
        driver, cuda = _driver_version(), torch_cuda_version()
        return cls("gpu", gpus, memory.total, memory.available, dtypes, driver, cuda)


def torch_cuda_version() -> str | None:
    import torch

    cuda: str | None = torch.version.cuda
    return cuda


def driver_problem(driver: str | None, cuda: str | None) -> str | None:
    """Why ``driver`` cannot run torch's CUDA ``cuda``, with the ways out; None if it can."""
    if not driver or not cuda:
        return None
    needed = MIN_DRIVER.get(int(cuda.split(".")[0]))
    if needed is None or int(driver.split(".")[0]) >= needed:
        return None
    return (
        f"NVIDIA driver {driver} is too old for this build (torch for CUDA {cuda} needs "
        f"driver {needed} or later): update the host's driver to the {needed} series or "
        "later; or run the CPU build (bash scripts/setup.sh cpu, or the image with "
        "TARGET=cpu); or run a vLLM server built for your driver and point the app at it "
        "(ERNIE_ENGINE=remote, ERNIE_REMOTE_URL)"
    )


def _driver_version() -> str | None:
    nvml = vllm_nvml()
    nvml.nvmlInit()
    try:
        version = nvml.nvmlSystemGetDriverVersion()
    finally:
        nvml.nvmlShutdown()
    return version.decode() if isinstance(version, bytes) else str(version)


def _probe_gpu(platform: Any, index: int) -> Gpu:
    nvml = vllm_nvml()
    capability = platform.get_device_capability(index)
    nvml.nvmlInit()
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(platform.device_id_to_physical_device_id(index))
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        name = nvml.nvmlDeviceGetName(handle)
    finally:
        nvml.nvmlShutdown()
    return Gpu(
        name=name.decode() if isinstance(name, bytes) else str(name),
        total_bytes=int(memory.total),
        free_bytes=int(memory.free),
        capability=(capability.major, capability.minor) if capability else (0, 0),
    )
