"""Settings to vLLM's engine arguments: the one place that knows vLLM's argument names."""

from __future__ import annotations

import os
from typing import Any

from vllm.engine.arg_utils import AsyncEngineArgs

from .settings import PROFILES, Settings

__all__ = ["build_engine_args", "memory_share"]

# vLLM's CPU backend reads gpu_memory_utilization as a share of RAM and refuses to start
# when that much is not free; 0.92 failed on a 24 GiB machine, 0.30 works.
CPU_MEMORY_SHARE = 0.30
GiB = 1 << 30


def memory_share(settings: Settings, *, cpu: bool) -> float:
    """The memory share vLLM gets: the explicit setting, else the profile's on a GPU,
    else the CPU backend's (a profile's GPU share of RAM would not be free)."""
    if settings.gpu_memory_utilization is not None:
        return settings.gpu_memory_utilization
    return CPU_MEMORY_SHARE if cpu else PROFILES[settings.profile].gpu_memory_utilization


def build_engine_args(settings: Settings, *, cpu: bool) -> AsyncEngineArgs:
    """Engine arguments from settings; unset values keep vLLM's defaults."""
    eager = settings.enforce_eager
    args: dict[str, Any] = {
        "model": settings.model,
        "tokenizer": settings.tokenizer or settings.model,
        "revision": settings.revision,
        "dtype": settings.dtype,
        "max_model_len": settings.max_model_len,
        "tensor_parallel_size": settings.tensor_parallel_size,
        "pipeline_parallel_size": settings.pipeline_parallel_size,
        "gpu_memory_utilization": memory_share(settings, cpu=cpu),
        "max_num_seqs": settings.max_num_seqs,
        "enforce_eager": eager if eager is not None else cpu,
        "load_format": settings.load_format,
    }
    optional = {
        "block_size": settings.block_size,
        "enable_prefix_caching": settings.enable_prefix_caching,
        "kv_cache_memory_bytes": None
        if settings.kv_cache_gb is None
        else int(settings.kv_cache_gb * GiB),
    }
    args.update({k: v for k, v in optional.items() if v is not None})
    if not cpu:
        # The engine core must inherit this process's modules as they are (Chainlit's
        # import fix, see engine.compat); vLLM's CPU backend always spawns.
        os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "fork")
    return AsyncEngineArgs(**args)
