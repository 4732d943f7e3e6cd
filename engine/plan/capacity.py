"""What the loaded engine can hold: the operator's capacity report.

Built once the engine is up, from the numbers vLLM's engine process reported back
(KV cache blocks and tokens, concurrency) and the checked plan (model shape, hardware).
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from typing import Any

from engine.model.memory import GiB
from engine.plan.batch import TYPICAL_CHAT_TOKENS
from engine.plan.plan import Plan
from engine.vllm_door.internals import attention_backend
from settings.settings import env_name

__all__ = ["TYPICAL_CHAT_TOKENS", "CapacityReport", "capacity_report"]

logger = logging.getLogger(__name__)

DECIDING_SETTINGS = (
    "profile",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "gpu_memory_utilization",
    "kv_cache_gb",
    "block_size",
    "dtype",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "enable_prefix_caching",
    "enforce_eager",
    "stream_interval",
    "cuda_graph_max",
    "workers",
    "engines",
)


@dataclass(frozen=True)
class CapacityReport:
    backend: str  # cpu or gpu
    device: str
    attention_backend: str | None
    dtype: str
    weights_gib: float | None  # per device
    kv_cache_gib: float | None  # per device
    kv_cache_tokens: int
    kv_cache_blocks: int
    block_size: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    full_length_requests: float  # requests of max_model_len tokens the KV cache holds at once
    typical_chat_tokens: int
    typical_chats: int  # chats of typical_chat_tokens at once (also bounded by max_num_seqs)
    settings: dict[str, dict[str, Any]]  # the settings that decided it: value and source
    engines: int = 1  # engine cores, each with the KV cache and batch above (ERNIE_ENGINES)
    replies: tuple[int, int, str] = (0, 0, "")  # each core's cap and line (Plan.replies), why

    def as_dict(self) -> dict[str, Any]:
        """The report, and the chats held at once by each core and by all, with why."""
        at_once = {
            "each_core": self.typical_chats,
            "all_cores": self.typical_chats * self.engines,
            "batch_from": self.settings.get("max_num_seqs", {}).get("from"),
        }
        return asdict(self) | {"chats_at_once": at_once}

    def lines(self) -> list[str]:
        """The report as an operator reads it in a log or a terminal."""
        weights = "unknown" if self.weights_gib is None else f"{self.weights_gib:.2f} GiB"
        kv_gib = "" if self.kv_cache_gib is None else f"{self.kv_cache_gib:.2f} GiB, "
        decided = ", ".join(
            f"{env_name(name)}={item['value']} ({item['from']})"
            for name, item in self.settings.items()
        )
        return [
            f"backend: {self.backend.upper()} on {self.device}, attention "
            f"{self.attention_backend or 'unknown'}, {self.dtype}",
            f"weights: {weights} per device",
            f"KV cache: {kv_gib}{self.kv_cache_tokens:,} tokens in {self.kv_cache_blocks:,} "
            f"blocks of {self.block_size}",
            f"at once: {self.full_length_requests:.2f} requests of the full "
            f"{self.max_model_len:,} tokens; {self.typical_chats} chats of "
            f"{self.typical_chat_tokens:,} tokens (max_num_seqs {self.max_num_seqs}, "
            f"{self.max_num_batched_tokens:,} tokens a step)",
            *self._engines_lines(),
            f"the web app: {self.replies[0]} replies at once a core, {self.replies[1]} more may "
            f"wait in line ({self.replies[2]})",
            f"decided by: {decided}",
        ]

    def _engines_lines(self) -> list[str]:
        """With several engine cores the figures above are each core's: the whole too."""
        if self.engines == 1:
            return []
        kv_gib = (
            "" if self.kv_cache_gib is None else f"{self.kv_cache_gib * self.engines:.2f} GiB, "
        )
        return [
            f"engine cores: {self.engines}, each with the KV cache and batch above; in all "
            f"{kv_gib}{self.kv_cache_tokens * self.engines:,} tokens, "
            f"{self.typical_chats * self.engines} chats of {self.typical_chat_tokens:,} tokens "
            f"(max_num_seqs {self.max_num_seqs * self.engines})"
        ]


def _weights_bytes(model: str, revision: str | None, dtype_bytes: int) -> int | None:
    """Parameters x dtype size, counted on PyTorch's meta device (no memory, any weights
    format, also for dummy weights); None for an architecture transformers lacks."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(model, revision=revision)
        with torch.device("meta"):
            skeleton = AutoModelForCausalLM.from_config(config)
    except (ValueError, KeyError, OSError) as exc:
        logger.warning("weights size unknown: %s", exc)
        return None
    return int(skeleton.num_parameters()) * dtype_bytes


def _attention_backend(vllm_config: Any, head_size: int) -> str | None:
    """The attention backend vLLM selects for this config, asked the way its layers ask."""
    try:
        return attention_backend(vllm_config, head_size)
    except (TypeError, ValueError, NotImplementedError) as exc:  # another vLLM's signature
        logger.warning("attention backend unknown: %s", exc)
        return None


def capacity_report(vllm_config: Any, plan: Plan) -> CapacityReport:
    """The report for an engine vLLM has finished building (blocking: call from a thread)."""
    cache = vllm_config.cache_config
    settings = plan.settings
    tp_pp = settings.tensor_parallel_size * settings.pipeline_parallel_size
    dtype = str(vllm_config.model_config.dtype).removeprefix("torch.")
    dtype_bytes = int(vllm_config.model_config.dtype.itemsize)
    blocks, block_size = int(cache.num_gpu_blocks or 0), int(cache.block_size)
    tokens = int(getattr(cache, "kv_cache_size_tokens", None) or blocks * block_size)
    max_model_len = int(vllm_config.model_config.max_model_len)
    max_num_seqs = int(vllm_config.scheduler_config.max_num_seqs)
    step_tokens = int(vllm_config.scheduler_config.max_num_batched_tokens)
    concurrency = getattr(cache, "kv_cache_max_concurrency", None) or tokens / max_model_len
    typical_blocks = math.ceil(TYPICAL_CHAT_TOKENS / block_size)
    weights = _weights_bytes(settings.model, settings.revision, dtype_bytes)
    kv_gib = None
    if plan.shape is not None:
        per_token = plan.shape.kv_bytes_per_token(dtype, settings.tensor_parallel_size)
        kv_gib = blocks * block_size * per_token / GiB
    resolved = {
        "gpu_memory_utilization": plan.memory_share,
        "block_size": block_size,
        "dtype": dtype,
        "enforce_eager": vllm_config.model_config.enforce_eager,
        "enable_prefix_caching": cache.enable_prefix_caching,
        "workers": plan.workers,
        "engines": plan.engines,
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": step_tokens,
        "stream_interval": plan.stream_interval,
        "cuda_graph_max": plan.cuda_graph_max,
    }
    sources, replies = plan.sources(), plan.replies
    decided = {
        name: {"value": resolved.get(name, getattr(settings, name)), "from": sources[name]}
        for name in DECIDING_SETTINGS
    }
    return CapacityReport(
        backend=plan.hardware.backend,
        device=plan.hardware.device,
        attention_backend=_attention_backend(vllm_config, plan.shape.head_dim)
        if plan.shape
        else None,
        dtype=dtype,
        weights_gib=None if weights is None else weights / tp_pp / GiB,
        kv_cache_gib=kv_gib,
        kv_cache_tokens=tokens,
        kv_cache_blocks=blocks,
        block_size=block_size,
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=step_tokens,
        full_length_requests=round(float(concurrency), 2),
        typical_chat_tokens=TYPICAL_CHAT_TOKENS,
        typical_chats=min(max_num_seqs, blocks // typical_blocks),
        settings=decided,
        engines=plan.engines,
        replies=(replies.slots, replies.line, "; ".join(replies.sources)),
    )
