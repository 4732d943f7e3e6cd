"""``python -m bench`` at its smallest: a smoke run of its machinery (one path: one closed
load of a few tokens, then the open loop at a tiny rate; and one load shape against the
session's demo app). It proves the report, not the numbers: those come from ``python -m
bench`` itself (docs/benchmarks.md). The path is ``remote`` on the session's ``vllm
serve`` (``--vllm-url``): the bench's app, its sockets and its report, with no engine of
its own to load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.clients import cpu_list
from bench.measure import LoadResult
from bench.openloop import Slo, Turn, summarise
from bench.report import comparisons
from bench.variants import api_servers_of, group_env, lever, with_variants
from testing.demo import APP_ENV
from testing.engines import DemoApp
from testing.servers import ROOT, Server, clean_environ


@pytest.mark.engine
def test_the_bench_measures_a_path_and_a_shape_and_writes_its_report(
    scripted_model: Path, demo_app: DemoApp, vllm_server: Server, tmp_path: Path
) -> None:
    env = clean_environ(**APP_ENV, ERNIE_MODEL=str(scripted_model))
    out = tmp_path / "bench"
    command = [sys.executable, "-m", "bench", "--paths", "remote", "--concurrency", "2"]
    command += ["--vllm-url", vllm_server.url]
    command += ["--reply-tokens", "8", "--shapes", "at-connect", "--shape-chats", "2"]
    command += ["--url", demo_app.server.url, "--out", str(out)]
    command += ["--rate", "1", "--duration-s", "3", "--warm-up-s", "1", "--turns", "2"]
    command += ["--think-s", "0.2", "--client-procs", "2"]  # the visitors from 2 processes
    command += ["--reply-median", "16", "--reply-max", "32"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]

    report = json.loads((out / "bench.json").read_text(encoding="utf-8"))
    (run,) = report["results"]
    assert (run["path"], run["chats"], run["reply_tokens"]) == ("remote", 2, 8)
    assert run["ttft_p50_ms"] > 0 and run["total_tokens_per_s"] > 0
    assert run["frames_per_reply"] >= 1 and run["peak_rss_mib"] > 0
    assert [r["path"] for r in report["cold_bursts"]] == ["remote-cold"]
    (rate,) = report["open_loop"]  # every conversation's every turn answered, timed
    assert rate["path"] == "remote" and rate["offered_rate"] == 1.0 and rate["failed_turns"] == 0
    assert rate["turns"] == 2 * rate["conversations"] > 0 and rate["ttft_p99_ms"] > 0
    assert rate["itl_p99_ms"] > 0 and 0 <= rate["goodput"] <= 1
    assert rate["client_cores"] > 0 and rate["app_cores"] > 0  # each side's CPU, counted
    assert report["capacity"]["remote"] in (None, 1.0)
    assert "remote: warmed up at 1/s for 1 s" in result.stderr  # and not reported: one rate
    (shape,) = report["shapes"]
    assert (shape["sent"], shape["answered"], shape["lost"]) == (2, 2, 0), shape
    assert (out / "bench.png").read_bytes().startswith(b"\x89PNG")
    assert "TTFT p50 ms" in result.stdout and "answered" in result.stdout  # the tables
    assert "offered/s" in result.stdout and "capacity at the SLO" in result.stdout


def result(path: str, chats: int, tokens_per_s: float, ttft_ms: float) -> LoadResult:
    return LoadResult(path, chats, 16, ttft_ms, ttft_ms * 2, 10.0, tokens_per_s, 4.0,
                      1.0, 0.5, 300.0)  # fmt: skip


def test_the_report_compares_every_path_measured_with_the_engine() -> None:
    """The ratios the bench prints, from the measurements of a run (no engine needed)."""
    results = [
        result("engine", 16, 1000.0, 20.0),
        result("app", 16, 900.0, 30.0),
        result("http", 16, 600.0, 50.0),
        result("remote", 16, 450.0, 40.0),
        result("workers", 16, 950.0, 25.0),
        result("engines@base", 16, 1100.0, 22.0),  # --baseline: the version before
        result("engines-w4", 16, 1250.0, 21.0),  # --engine-workers 2 4: a second count
    ]
    rows = comparisons(results, [result("app-cold", 16, 800.0, 45.0)])
    app = next(row for row in rows if "app/engine tok/s" in row)
    assert app["app/engine tok/s"] == 0.9 and app["app-engine TTFT p50 ms"] == 10.0
    assert app["target app>=0.9 engine at 16"] and app["app/http tok/s"] == 1.5
    assert app["remote/app tok/s"] == 0.5
    assert any(row.get("workers/engine tok/s") == 0.95 for row in rows)
    assert any(row.get("engines@base/engine tok/s") == 1.1 for row in rows)
    assert any(row.get("engines-w4/engine tok/s") == 1.25 for row in rows)
    assert any(row.get("app-cold TTFT p50 / steady") == 1.5 for row in rows)


def test_worker_counts_caps_levers_and_api_servers_run_as_paths_of_one_invocation() -> None:
    """``--engine-workers 2 4``: the default count is ``engines``, the others ``engines-wN``;
    ``--caps 512``: ``engines-cap512``; ``--lever si4:ERNIE_STREAM_INTERVAL=4``:
    ``engines-si4``; ``--peer-api-servers 4``: ``vllm-a4`` beside ``vllm``."""
    paths = ["engine", "engines", "app", "vllm"]
    levers = ["si4:ERNIE_STREAM_INTERVAL=4", "fi:VLLM_USE_FLASHINFER_SAMPLER=1,ERNIE_X=y"]
    assert with_variants(paths, [2, 4, 3, 4], [512], levers, [1, 4]) == [
        "engine",
        "engines",
        "engines-w4",
        "engines-w3",
        "engines-cap512",
        "engines-si4",
        "engines-fi",
        "app",
        "vllm",
        "vllm-a4",
    ]
    assert with_variants(paths, [2], []) == paths
    assert with_variants(["engine"], [2, 4], [512], levers) == ["engine"]
    two = {"ERNIE_ENGINES": "2", "ERNIE_WORKERS": "2"}
    assert group_env("engines-cap512", 2, 2, levers) == two | {"ERNIE_MAX_REPLIES": "512"}
    assert group_env("engines-w4", 2, 2, levers) == two | {"ERNIE_WORKERS": "4"}
    assert group_env("engines-fi", 2, 2, levers) == two | {
        "VLLM_USE_FLASHINFER_SAMPLER": "1",
        "ERNIE_X": "y",
    }
    assert group_env("engines", 2, 2, levers) == two
    assert (api_servers_of("vllm"), api_servers_of("vllm-a4")) == (1, 4)
    with pytest.raises(ValueError, match="NAME:SETTING=VALUE"):
        lever("no settings")
    assert cpu_list("0-3,6,8-9") == {0, 1, 2, 3, 6, 8, 9}


def test_the_open_loop_counts_the_turns_that_waited_in_line_apart() -> None:
    """Those admitted at once keep their own first-token p99 (the SLO of those admitted)."""
    admitted = [Turn(0.0, 0.1 * n, 2.0, (1.0, 2.0), 10) for n in range(1, 4)]
    waited = [Turn(0.0, 5.0 + n, 8.0, (6.0, 8.0), 10, waited=True) for n in range(2)]
    result = summarise("engines", 1.0, [admitted, waited], Slo())
    assert result.waited_turns == 2 and result.admitted_ttft_p99_ms <= 300.0
    assert result.waited_ttft_p50_ms == 5500.0 and not result.meets_slo
