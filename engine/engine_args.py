"""A checked plan to vLLM's engine arguments: the one place that knows vLLM's argument names."""

from __future__ import annotations

import os
from typing import Any

from vllm.engine.arg_utils import AsyncEngineArgs

from engine.model.memory import GiB
from engine.plan.plan import Plan

# How long the engine core's executor waits for its workers at a stop (vLLM's 5 s: under
# load a CPU worker's teardown took longer, and it was signalled with two warnings).
WORKER_TEARDOWN_S = 12

__all__ = ["build_engine_args"]


def build_engine_args(plan: Plan) -> AsyncEngineArgs:
    """One engine core's arguments from the plan; unset values keep vLLM's defaults. With
    ``ERNIE_ENGINES`` above 1 the core gets its share of the memory (``engine.plan.placement``)
    and a batch of its own (``engine.plan.batch``)."""
    settings, cpu, cores, batch = plan.settings, plan.hardware.cpu, plan.placement, plan.batch
    eager = settings.enforce_eager
    args: dict[str, Any] = {
        "model": settings.model,
        "tokenizer": settings.tokenizer or settings.model,
        "revision": settings.revision,
        "dtype": settings.dtype,
        "max_model_len": settings.max_model_len,
        "tensor_parallel_size": settings.tensor_parallel_size,
        "pipeline_parallel_size": settings.pipeline_parallel_size,
        "gpu_memory_utilization": cores.share(plan.memory_share),
        "max_num_seqs": batch.max_num_seqs,
        "enforce_eager": eager if eager is not None else cpu,
        "load_format": settings.load_format,
        "stream_interval": plan.stream_interval,
        # The console shows the app's lines: loading is reported as the engine's state.
        "use_tqdm_on_load": False,
    }
    optional = {
        "block_size": settings.block_size,
        "enable_prefix_caching": settings.enable_prefix_caching,
        "max_num_batched_tokens": batch.max_num_batched_tokens,
        "max_cudagraph_capture_size": plan.cuda_graph_max,
        "kv_cache_memory_bytes": None
        if settings.kv_cache_gb is None
        else int(cores.kv_cache_gib(settings.kv_cache_gb) * GiB),
    }
    args.update({k: v for k, v in optional.items() if v is not None})
    # The core itself gets TEARDOWN_S (internals), longer.
    os.environ.setdefault("VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS", str(WORKER_TEARDOWN_S))
    if not cpu:
        # The engine core must inherit this process's modules as they are (Chainlit's
        # import fix, see chat.chainlit_door.patches); vLLM's CPU backend always spawns.
        os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "fork")
    return AsyncEngineArgs(**args)
