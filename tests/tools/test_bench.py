"""``python -m bench`` at its smallest: the default paths, the workers (a group of two),
two bare engine cores at once and the remote one (two app replicas on one vLLM server)
run, and the report is complete.
The http and remote paths use the session's ``vllm serve`` (``--vllm-url``), so the run is
on its scripted model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testing.demo import APP_ENV
from testing.servers import ROOT, Server, clean_environ

pytestmark = pytest.mark.engine


def test_bench_runs_all_paths_and_writes_its_report(
    scripted_model: Path, vllm_server: Server, tmp_path: Path
) -> None:
    env = clean_environ(**APP_ENV, ERNIE_MODEL=str(scripted_model))
    out = tmp_path / "bench"
    command = [sys.executable, "-m", "bench", "--concurrency", "1", "2", "--reply-tokens", "16"]
    command += ["--paths", "engine", "app", "http", "workers", "cores", "remote"]
    command += ["--replicas", "2", "--workers", "2", "--engines", "2", "--rounds", "2"]
    command += ["--vllm-url", vllm_server.url]
    result = subprocess.run(
        [*command, "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]

    report = json.loads((out / "bench.json").read_text(encoding="utf-8"))
    runs = {(r["path"], r["chats"]): r for r in report["results"]}
    paths = ("engine", "app", "http", "workers", "cores", "remote")
    assert set(runs) == {(p, c) for p in paths for c in (1, 2)}
    for run in runs.values():
        assert run["reply_tokens"] == 16
        assert run["ttft_p50_ms"] > 0 and run["total_tokens_per_s"] > 0
        assert run["frames_per_reply"] >= 1 and run["peak_rss_mib"] > 0
    # The guides' app sends a websocket message per token; the app coalesces.
    assert runs[("http", 2)]["frames_per_reply"] >= 15
    colds = {"app-cold", "http-cold", "workers-cold", "remote-cold"}
    assert {r["path"] for r in report["cold_bursts"]} == colds
    compared = {row["chats"]: row for row in report["comparisons"] if "app/engine tok/s" in row}
    assert set(compared) == {1, 2}
    assert all("app/http tok/s" in row and "remote/app tok/s" in row for row in compared.values())
    for path in ("workers", "cores"):
        rows = {r["chats"] for r in report["comparisons"] if f"{path}/engine tok/s" in r}
        assert rows == {1, 2}, path
    # Two app processes served the remote path: each answered one of the two chats.
    for replica in ("remote-0.log", "remote-1.log"):
        assert "request chat-" in (out / replica).read_text(encoding="utf-8")
    assert (out / "bench.png").read_bytes().startswith(b"\x89PNG")
    assert "app/engine tok/s" in result.stdout  # the printed ratios
