"""Company sign-in with OpenID Connect against a real provider process (panva's
node-oidc-provider, started here): a full sign-in in Chromium through the provider's own
login and consent pages, in both languages, then a chat as that user; the app's own
session controls still hold (a sign-out ends the session's copies); a wrong client secret
stops the start in one line naming the setting."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, expect

from testing.accounts import AUTH_SECRET
from testing.browser import STATS_LINE, Chat, screenshot_path
from testing.oidc_provider import oidc_provider
from testing.programs import needs
from testing.servers import ROOT, AppServer, Server, clean_environ, free_port

pytestmark = [pytest.mark.engine, needs("node", "nodejs")]

CLIENT, SECRET = "ernie-chat", "client-secret-" + "s" * 30


@pytest.fixture(scope="module")
def oidc_app(
    scripted_model: Path, vllm_server: Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[AppServer, str]]:
    """The app with company sign-in only, on the session's vllm serve; and the issuer."""
    folder = tmp_path_factory.mktemp("oidc")
    port = free_port()
    callback = f"http://127.0.0.1:{port}/auth/oauth/oidc/callback"
    with oidc_provider(CLIENT, SECRET, callback, folder / "provider.log") as issuer:
        env = _env(scripted_model, vllm_server, issuer)
        env["ERNIE_HISTORY_URL"] = f"sqlite:///{folder / 'history.db'}"
        with AppServer.run(env, folder / "app.log", port=port) as app:
            app.wait("/readyz", timeout_s=180)
            yield app, issuer


def _env(model: Path, server: Server, issuer: str, secret: str = SECRET) -> dict[str, str]:
    return {
        "ERNIE_MODEL": str(model),
        "ERNIE_ENGINE": "remote",
        "ERNIE_REMOTE_URL": server.url,
        "ERNIE_MAX_MODEL_LEN": "2048",
        "ERNIE_WARMUP": "false",
        "ERNIE_OIDC_ISSUER": issuer,
        "ERNIE_OIDC_CLIENT_ID": CLIENT,
        "ERNIE_OIDC_CLIENT_SECRET": secret,
        "CHAINLIT_AUTH_SECRET": AUTH_SECRET,
    }


@pytest.mark.parametrize(("locale", "stats"), [("en-US", STATS_LINE), ("zh-CN", "首词元")])
async def test_a_full_sign_in_on_the_providers_own_page_then_a_chat(
    oidc_app: tuple[AppServer, str], browser: Browser, locale: str, stats: str
) -> None:
    app, issuer = oidc_app
    context = await browser.new_context(locale=locale, viewport={"width": 1100, "height": 900})
    page = await context.new_page()
    await page.goto(app.url)
    await page.get_by_role("button", name=re.compile("oidc", re.I)).click()
    await page.wait_for_url(f"{issuer}/**")  # the provider's own login page
    await page.locator("input[name=login]").fill(f"kim-{locale}")
    await page.locator("input[name=password]").fill("anything")
    await page.locator("button[type=submit]").click()
    await page.locator("button[type=submit]").click()  # its consent page: continue
    await expect(page.locator("#chat-input")).to_be_visible(timeout=60_000)
    me = await (await page.request.get(f"{app.url}/user")).json()
    assert me["identifier"] == f"kim-{locale}@example.com" and me["metadata"]["provider"] == "oidc"
    chat = Chat(page)
    page.on("websocket", chat._watch)
    await page.reload()
    await expect(page.locator("#chat-input")).to_be_visible(timeout=60_000)
    await chat.wait_for("task_end")  # the socket connected, the chat started
    await chat.send("你好，我是公司用户")
    await expect(chat.assistant().filter(has_text=stats)).to_have_count(1, timeout=120_000)
    await page.screenshot(path=screenshot_path(f"oidc-{locale}.png"))
    token = next(c["value"] for c in await context.cookies() if c["name"] == "access_token")
    await page.request.post(f"{app.url}/logout")  # the app's own sign-out still holds
    copied = httpx.get(f"{app.url}/user", cookies={"access_token": token}, timeout=10)
    assert copied.status_code == 401, copied.text
    await context.close()


def test_a_wrong_client_secret_stops_the_start_in_one_line(
    oidc_app: tuple[AppServer, str], scripted_model: Path, vllm_server: Server
) -> None:
    _, issuer = oidc_app
    env = clean_environ(**_env(scripted_model, vllm_server, issuer, secret="not-the-secret"))
    started = subprocess.run(
        [sys.executable, "-m", "serve", "--port", str(free_port())],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    errors = [line for line in started.stderr.splitlines() if line.startswith("error:")]
    assert started.returncode == 2, started.stderr[-2000:]
    assert len(errors) == 1 and "ERNIE_OIDC_CLIENT_SECRET" in errors[0], started.stderr[-2000:]
    assert "invalid_client" in errors[0] and "not-the-secret" not in started.stderr
