"""Deployment presets: the values that size an engine for one kind of use (the batch as a
factor of the device's: ``engine.plan.batch``).

``ERNIE_PROFILE`` picks one; any explicit ``ERNIE_*`` value wins over its profile. The
profile table in docs/operations.md says how each was measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["DEFAULT_PROFILE", "PROFILES", "PROFILE_FIELDS", "Profile", "ProfileName"]

ProfileName = Literal["high-concurrency", "balanced", "long-context"]


@dataclass(frozen=True)
class Profile:
    """Presets for one deployment scenario."""

    max_model_len: int
    # Each core's batch: this times what vLLM gives a server alone on the device
    # (``engine.plan.batch``); the tokens a step never fewer than vLLM's.
    batch_factor: float
    gpu_memory_utilization: float  # on a GPU; the CPU backend keeps its own share of RAM


PROFILES: dict[str, Profile] = {
    "high-concurrency": Profile(max_model_len=4096, batch_factor=2, gpu_memory_utilization=0.90),
    "balanced": Profile(max_model_len=16384, batch_factor=1, gpu_memory_utilization=0.90),
    "long-context": Profile(max_model_len=131072, batch_factor=1 / 8, gpu_memory_utilization=0.90),
}
DEFAULT_PROFILE: ProfileName = "balanced"
PROFILE_FIELDS = ("max_model_len", "gpu_memory_utilization")
