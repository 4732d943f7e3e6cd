"""The operations endpoints of the running app: health, readiness with capacity, metrics."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from testing.accounts import OPS_TOKEN, forwarded
from testing.engines import DemoApp
from testing.polling import until_sync
from testing.servers import ROOT, AppServer

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def server(demo_app: DemoApp) -> AppServer:
    return demo_app.server


def test_readyz_is_503_while_loading_then_200_with_the_capacity(demo_app: DemoApp) -> None:
    server = demo_app.server
    assert httpx.get(f"{server.url}/healthz").json() == {"status": "alive"}
    code, body = demo_app.first_readyz  # the page serves at once; the engine loads for seconds
    assert code == 503, body
    assert body["state"] == "loading" and body["elapsed_s"] >= 0
    code, body = server.readyz()

    def ready() -> tuple[int, dict[str, Any]] | None:
        answer = server.readyz()
        assert answer[0] == 200 or answer[1]["state"] == "loading", answer
        return answer if answer[0] == 200 else None

    code, body = until_sync(ready, 300, "ready engine", interval_s=0.5)

    capacity = body["capacity"]
    assert body["state"] == "ready" and body["running_requests"] == 0
    assert capacity["backend"] == "cpu" and capacity["max_model_len"] == 16384
    assert capacity["kv_cache_tokens"] == capacity["kv_cache_blocks"] * capacity["block_size"]
    assert capacity["settings"]["kv_cache_gb"] == {"value": 0.5, "from": "environment"}
    assert httpx.get(f"{server.url}/healthz").status_code == 200


def test_the_console_up_to_ready_fits_on_one_screen(demo_app: DemoApp) -> None:
    """The app's own lines; vLLM's and Chainlit's progress goes to the full log."""
    server = demo_app.server
    server.wait("/readyz", 300)
    console = server.log.read_text(errors="replace").splitlines()
    up_to_ready = console[: next(i for i, line in enumerate(console) if "engine ready" in line) + 1]
    assert len(up_to_ready) <= 25, "\n".join(up_to_ready)
    assert "capacity: decided by:" in "\n".join(up_to_ready)
    full_log = Path(up_to_ready[0].rsplit("the full log: ", 1)[1])
    everything = full_log.read_text(errors="replace")
    assert "Initializing a V1 LLM engine" in everything  # vLLM's INFO, only in the file
    assert "Initializing a V1 LLM engine" not in server.log.read_text(errors="replace")


def test_metrics_parse_and_count_a_chat(server: AppServer) -> None:
    chat = subprocess.run(
        [sys.executable, "scripts/socket_chat.py", server.url, "你好", "--wait-ready", "300"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=360,
    )
    assert chat.returncode == 0, chat.stderr[-2000:]

    response = httpx.get(f"{server.url}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    samples = {s.name: s.value for f in families.values() for s in f.samples if not s.labels}

    assert samples["ernie_messages_total"] >= 1
    assert samples["ernie_time_to_first_token_seconds_count"] >= 1
    assert samples["ernie_reply_tokens_count"] >= 1
    assert samples["ernie_reply_tokens_sum"] >= 1
    assert "ernie_chats_open" in samples and "ernie_stops_total" in samples
    assert "ernie_errors" in families and "ernie_replies" in families
    # vLLM's own engine metrics, from the same scrape
    assert "vllm:num_requests_running" in families
    generated = [
        s.value for s in families["vllm:generation_tokens"].samples if s.name.endswith("_total")
    ]
    assert generated and sum(generated) >= 1


async def test_the_operations_endpoints_tell_the_details_only_to_the_token(
    signed_app: AppServer,
) -> None:
    bearer = {"Authorization": f"Bearer {OPS_TOKEN}"}
    assert httpx.get(f"{signed_app.url}/metrics", timeout=10).status_code == 401
    wrong = {"Authorization": f"Bearer {OPS_TOKEN}x"}
    assert httpx.get(f"{signed_app.url}/metrics", headers=wrong, timeout=10).status_code == 401
    metrics = httpx.get(f"{signed_app.url}/metrics", headers=bearer, timeout=10)
    assert metrics.status_code == 200 and "ernie_messages_total" in metrics.text
    open_ready = httpx.get(f"{signed_app.url}/readyz", timeout=10)
    assert open_ready.status_code == 200 and open_ready.json() == {"state": "ready"}
    detail = httpx.get(f"{signed_app.url}/readyz", headers=bearer, timeout=10).json()
    assert detail["capacity"]["backend"] == "remote"


async def test_without_a_token_only_the_machine_itself_sees_the_details(
    open_app: AppServer,
) -> None:
    """Without ERNIE_OPS_TOKEN a visitor from elsewhere (here one the trusted proxy names)
    sees the state and nothing of the model, the settings or the metrics; the operator on
    the machine (a loopback address) sees all."""
    from_afar = forwarded("203.0.113.9")
    seen = httpx.get(f"{open_app.url}/readyz", headers=from_afar, timeout=10)
    assert seen.status_code == 200 and seen.json() == {"state": "ready"}
    assert httpx.get(f"{open_app.url}/metrics", headers=from_afar, timeout=10).status_code == 401
    local = httpx.get(f"{open_app.url}/readyz", headers=forwarded("127.0.0.1"), timeout=10)
    assert local.json()["capacity"]["backend"] == "remote"
    assert httpx.get(f"{open_app.url}/metrics", timeout=10).status_code == 200


async def test_the_history_and_the_log_are_the_apps_alone(
    signed_app: AppServer, users_file: Path
) -> None:
    """The history and the logs were created 0644: anyone on the machine could read them."""
    folder = users_file.parent
    for path in (folder / "history.db", folder / "logs" / "ernie-chat.log"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE((folder / "logs").stat().st_mode) == 0o700
