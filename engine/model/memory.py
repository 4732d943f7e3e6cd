"""Every memory and KV-cache formula of the app, in one place.

The checks before loading, the capacity report, the translated engine errors and the
engine's arguments all size memory with these functions, so their numbers agree with
each other and with vLLM's own block arithmetic (a test holds that).
"""

from __future__ import annotations

import math

__all__ = [
    "BLOCK_MULTIPLE",
    "CPU_MEMORY_SHARE",
    "DEFAULT_BLOCK_SIZE",
    "DTYPE_BYTES",
    "GiB",
    "kv_bytes_per_token",
    "kv_gib_that_fits",
    "kv_tokens",
    "share_that_fits",
]

GiB = 1 << 30
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
# vLLM's CPU backend reads gpu_memory_utilization as a share of RAM and refuses to start
# when that much is not free; 0.92 failed on a 24 GiB machine, 0.30 works.
CPU_MEMORY_SHARE = 0.30
# The KV cache block sizes the attention kernels take (vLLM 0.29: CPU_ATTN MultipleOf(32),
# FLASH_ATTN MultipleOf(16)), and the sizes vLLM picks when none is set.
BLOCK_MULTIPLE = {"cpu": 32, "gpu": 16}
DEFAULT_BLOCK_SIZE = {"cpu": 128, "gpu": 16}
FREE_MARGIN = 0.95  # a suggested memory share leaves this much of what is free
KV_FREE_MARGIN = 0.8  # a suggested KV cache size leaves room for the engine beside it


def kv_bytes_per_token(
    *, layers: int, kv_heads: int, head_dim: int, dtype: str, tensor_parallel_size: int = 1
) -> int:
    """KV cache bytes one token takes on one device (keys and values, every layer)."""
    heads_here = max(1, kv_heads // tensor_parallel_size)
    return 2 * layers * heads_here * head_dim * DTYPE_BYTES[dtype]


def kv_tokens(cache_bytes: int, *, block_size: int, bytes_per_token: int) -> int:
    """Tokens a KV cache of ``cache_bytes`` holds, in whole blocks (as vLLM allocates)."""
    return cache_bytes // (block_size * bytes_per_token) * block_size


def share_that_fits(free: float, total: float) -> float:
    """The largest memory share (two decimals) that fits in what is free."""
    return math.floor(free / total * FREE_MARGIN * 100) / 100


def kv_gib_that_fits(free_gib: float) -> float:
    """The largest KV cache size (GiB, one decimal) to suggest when ``free_gib`` is free."""
    return math.floor(free_gib * KV_FREE_MARGIN * 10) / 10
