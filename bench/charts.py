"""``bench.png``: every path the run measured, closed bursts and the open loop side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .measure import LoadResult
from .openloop import RateResult

__all__ = ["write_chart"]


def _lines(axis: Any, rows: list[Any], x: str, y: str) -> None:
    for name in sorted({row.path for row in rows}):
        mine = sorted((r for r in rows if r.path == name), key=lambda r: getattr(r, x))
        axis.plot([getattr(r, x) for r in mine], [getattr(r, y) for r in mine], marker="o",
                  label=name)  # fmt: skip


def write_chart(
    path: Path, results: list[LoadResult], rates: list[RateResult], title: str, slo_ms: float
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("chats", "total_tokens_per_s"), ("chats", "ttft_p50_ms")] if results else []
    panels += [("offered_rate", "ttft_p99_ms"), ("offered_rate", "achieved_rate")] if rates else []
    figure, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    labels = {
        "total_tokens_per_s": "total tokens/s",
        "ttft_p50_ms": "time to first token p50 (ms)",
        "ttft_p99_ms": "time to first token p99 (ms)",
        "achieved_rate": "conversations/s achieved",
    }
    for axis, (x, y) in zip(axes[0], panels, strict=True):
        _lines(axis, results if x == "chats" else rates, x, y)
        if y == "ttft_p99_ms":
            axis.axhline(slo_ms, color="grey", linestyle="--", label="SLO")
        axis.set_xscale("log", base=2)
        axis.set_xlabel("chats at once" if x == "chats" else "conversations/s offered")
        axis.set_ylabel(labels[y])
        axis.grid(True, alpha=0.3)
        axis.legend()
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
