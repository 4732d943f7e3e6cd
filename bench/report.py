"""The run's table, ratios and targets; its JSON and PNG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .measure import LoadResult
from .openloop import RateResult, capacity

__all__ = ["capacities", "columns", "comparisons", "rates_table", "table", "write_json"]

# ERNIE_ENGINES' targets on one GPU (the issue): tok/s against the single engine, by chats.
ENGINES_TARGETS = {64: 1.2, 256: 1.4, 512: 2.6}
# The paths the app's own code serves: --baseline runs them from another checkout too.
BASELINE_PATHS = ("app", "chainlit", "workers", "engines")

COLUMNS = (
    ("path", "path"),
    ("chats", "chats"),
    ("ttft_p50_ms", "TTFT p50 ms"),
    ("ttft_p99_ms", "TTFT p99 ms"),
    ("chat_tokens_per_s_p50", "tok/s/chat p50"),
    ("total_tokens_per_s", "tok/s total"),
    ("frames_per_reply", "ws msgs/reply"),
    ("cpu_ms_per_token", "CPU ms/token"),
    ("peak_rss_mib", "peak MiB"),
)


def table(results: list[LoadResult]) -> str:
    return columns([r.as_dict() for r in results], COLUMNS)


def columns(rows: list[dict[str, Any]], named: tuple[tuple[str, str], ...]) -> str:
    """``rows`` as a text table of the ``named`` (key, label) columns."""
    lines = [[label for _, label in named]]
    lines += [[str(row[key]) for key, _ in named] for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(named))]
    return "\n".join(
        "  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)) for line in lines
    )


def _by(results: list[LoadResult], path: str) -> dict[int, LoadResult]:
    return {r.chats: r for r in results if r.path == path}


def comparisons(results: list[LoadResult], cold: list[LoadResult]) -> list[dict[str, Any]]:
    """Per concurrency: app/engine and app/http, and the targets met or missed."""
    engine, app, http = _by(results, "engine"), _by(results, "app"), _by(results, "http")
    remote = _by(results, "remote")
    rows = []
    for chats, mine in sorted(app.items()):
        row: dict[str, Any] = {"chats": chats}
        if chats in remote:  # what serving from vLLM servers costs against in-process
            far = remote[chats]
            row["remote/app tok/s"] = round(far.total_tokens_per_s / mine.total_tokens_per_s, 3)
            row["remote-app TTFT p50 ms"] = round(far.ttft_p50_ms - mine.ttft_p50_ms, 1)
        if chats in engine:
            ceiling = engine[chats]
            row["app/engine tok/s"] = round(mine.total_tokens_per_s / ceiling.total_tokens_per_s, 3)
            row["app-engine TTFT p50 ms"] = round(mine.ttft_p50_ms - ceiling.ttft_p50_ms, 1)
            if chats == 16:
                row["target app>=0.9 engine at 16"] = row["app/engine tok/s"] >= 0.9
            if chats == 1:
                row["target TTFT <=+10 ms at 1"] = row["app-engine TTFT p50 ms"] <= 10
        if chats in http:
            other = http[chats]
            row["app/http tok/s"] = round(mine.total_tokens_per_s / other.total_tokens_per_s, 3)
            row["app-http TTFT p50 ms"] = round(mine.ttft_p50_ms - other.ttft_p50_ms, 1)
            row["app/http CPU per token"] = round(mine.cpu_ms_per_token / other.cpu_ms_per_token, 3)
            row["target less CPU/token than http"] = mine.cpu_ms_per_token < other.cpu_ms_per_token
            if chats == 64:
                row["target app>=1.25 http at 64"] = row["app/http tok/s"] >= 1.25
        rows.append(row)
    rows += _against_engine(results, engine)
    for burst in cold:
        steady = _by(results, burst.path.removesuffix("-cold")).get(burst.chats)
        if steady is not None:
            rows.append(
                {
                    "chats": burst.chats,
                    f"{burst.path} TTFT p50 / steady": round(
                        burst.ttft_p50_ms / steady.ttft_p50_ms, 2
                    ),
                    f"target {burst.path} within 2x steady": burst.ttft_p50_ms
                    <= 2 * steady.ttft_p50_ms,
                }
            )
    return rows


RATE_COLUMNS = (
    ("path", "path"),
    ("offered_rate", "offered/s"),
    ("achieved_rate", "achieved/s"),
    ("ttft_p50_ms", "TTFT p50"),
    ("ttft_p90_ms", "p90"),
    ("ttft_p99_ms", "p99"),
    ("frame_gap_p50_ms", "frame gap p50"),
    ("frame_gap_p99_ms", "p99"),
    ("itl_p50_ms", "ms/token p50"),
    ("itl_p99_ms", "p99"),
    ("turn_p99_ms", "turn p99"),
    ("goodput", "goodput"),
    ("meets_slo", "SLO met"),
    ("app_cores", "app cores"),
    ("client_cores", "client cores"),
)


def rates_table(rates: list[RateResult]) -> str:
    return columns([r.as_dict() for r in rates], RATE_COLUMNS)


def capacities(rates: list[RateResult]) -> dict[str, Any]:
    """Each path's capacity at the SLO (conversations a second), and the targets: the
    default set-up (``engines``) against its ceiling (``cores``) and the single engine."""
    paths = sorted({r.path for r in rates})
    found: dict[str, Any] = {path: capacity(rates, path) for path in paths}
    engine, cores, default = found.get("engine"), found.get("cores"), found.get("engines")
    if default is not None and cores:
        found["engines/cores"] = round(default / cores, 3)
        found["target engines>=0.9 cores"] = default >= 0.9 * cores
    if default is not None and engine:
        found["engines/engine"] = round(default / engine, 3)
        found["target engines>=1.3 engine"] = default >= 1.3 * engine
    for path in paths:  # a change against the version before it (--baseline)
        before = found.get(f"{path}@base")
        if before and found[path] is not None:
            found[f"{path}/{path}@base"] = round(found[path] / before, 3)
    return found


def write_json(
    path: Path,
    meta: dict[str, Any],
    results: list[LoadResult],
    cold: list[LoadResult],
    rates: list[RateResult],
) -> None:
    data = {
        **meta,
        "results": [r.as_dict() for r in results],
        "cold_bursts": [r.as_dict() for r in cold],
        "comparisons": comparisons(results, cold),
        "open_loop": [r.as_dict() for r in rates],
        "capacity": capacities(rates),
    }
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")


def _against_engine(
    results: list[LoadResult], engine: dict[int, LoadResult]
) -> list[dict[str, Any]]:
    """The other in-process set-ups (``chainlit run``, the workers, several engine cores,
    their bare ceiling; ``--baseline``'s versions of them) against the engine."""
    rows = []
    based = (f"{path}@base" for path in BASELINE_PATHS)
    counts = sorted({r.path for r in results if r.path.startswith("engines-w")})
    for path in ("chainlit", "workers", "engines", *counts, "cores", *based):
        for chats, mine in sorted(_by(results, path).items()):
            if chats not in engine:
                continue
            ratio = round(mine.total_tokens_per_s / engine[chats].total_tokens_per_s, 3)
            gap = round(mine.ttft_p50_ms - engine[chats].ttft_p50_ms, 1)
            row: dict[str, Any] = {
                "chats": chats,
                f"{path}/engine tok/s": ratio,
                f"{path}-engine TTFT p50 ms": gap,
            }
            if path == "workers" and chats in (64, 256):
                row["target workers>=0.95 engine"] = ratio >= 0.95
            if path == "workers" and chats in (16, 64):
                row["target workers TTFT <=+15 ms"] = gap <= 15
            if path == "engines" and chats in ENGINES_TARGETS:
                row[f"target engines>={ENGINES_TARGETS[chats]} engine"] = (
                    ratio >= ENGINES_TARGETS[chats]
                )
            if path == "engines" and chats == 64:
                row["target engines TTFT <=+15 ms"] = gap <= 15
            rows.append(row)
    return rows
