"""A first start that downloads the model from a hub (a local one, through HF_ENDPOINT):
the chat and the console show the download's bytes; a download that stops ends in one
line; a restart fetches only what is missing. The real huggingface_hub client downloads
through the app's real loading code.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from testing.browser import Chat, screenshot_path
from testing.demo import APP_ENV
from testing.hub import HubServer
from testing.polling import until, until_sync
from testing.servers import AppServer

pytestmark = pytest.mark.engine

REPO = "test-org/ernie-demo"
WEIGHTS = "model.safetensors"


def hub_env(hub: HubServer, cache: Path) -> dict[str, str]:
    return APP_ENV | {"ERNIE_MODEL": REPO, "HF_ENDPOINT": hub.url, "HF_HOME": str(cache)}


async def test_the_loading_message_shows_the_download(
    browser: Browser, demo_model: Path, tmp_path: Path
) -> None:
    total_mb = sum(p.stat().st_size for p in demo_model.iterdir()) / 1e6
    half = (demo_model / WEIGHTS).stat().st_size // 2
    with (
        HubServer.run(demo_model, REPO, hold_at=half) as hub,  # the weights wait at half
        AppServer.run(hub_env(hub, tmp_path / "hf"), tmp_path / "app.log") as app,
    ):
        app.wait("/healthz", 120)  # the page serves while the engine loads
        chat = await Chat.open(browser, app.url, locale="zh-CN")
        notice = chat.page.get_by_text("正在下载模型")
        await expect(notice).to_be_visible(timeout=60_000)
        text = await notice.inner_text()
        shown = re.search(r"正在下载模型：([\d.]+) / ([\d.]+) MB，([\d.]+) MB/秒", text)
        assert shown, text
        assert float(shown.group(2)) == pytest.approx(total_mb, abs=0.15), text
        await chat.page.screenshot(path=screenshot_path("download-zh-CN.png"))
        hub.release()  # seen mid-download: the rest of the weights now
        ready = chat.page.get_by_text("模型已就绪").first
        await expect(ready).to_be_visible(timeout=240_000)  # then loaded, as before
    console = (tmp_path / "app.log").read_text(errors="replace")
    assert f"downloaded the model: {total_mb:,.1f} of {total_mb:,.1f} MB" in console


def test_a_download_that_stops_ends_in_one_line_and_a_restart_fetches_the_rest(
    demo_model: Path, tmp_path: Path
) -> None:
    weights = (demo_model / WEIGHTS).stat().st_size
    cache = tmp_path / "hf"
    with HubServer.run(demo_model, REPO, cut_at=weights // 3) as hub:
        with AppServer.run(hub_env(hub, cache), tmp_path / "cut.log") as app:
            app.wait("/healthz", 120)
            # huggingface_hub retries 5 times, 1 s apart
            settled = until_sync(
                lambda: (a := app.readyz())[1]["state"] != "loading" and a, 120, "end of loading"
            )
            code, body = settled
            assert code == 503 and body["state"] == "failed", body
            reason = str(body["reason"])
            assert reason.startswith(f"downloading {REPO} from {hub.url} stopped"), reason
            assert "HF_ENDPOINT" in reason and "ERNIE_MODEL" in reason and "\n" not in reason
        assert reason in (tmp_path / "cut.log").read_text(errors="replace")

        hub.cut_at, hub.served = None, {}
        with AppServer.run(hub_env(hub, cache), tmp_path / "again.log") as app:
            again = tmp_path / "again.log"  # the download's end is its line on the console
            asyncio.run(until(lambda: "downloaded the model" in again.read_text(), 120, "it"))
        # the files fetched whole came from the cache; huggingface_hub 2.4 starts a broken
        # file over (each process downloads to a temporary file of its own), and safetensors
        # readers ask for its header (a few KiB) again
        assert hub.served.get("tokenizer.json", 0) == 0, hub.served
        assert weights <= hub.served[WEIGHTS] < weights + 1_000_000, hub.served
