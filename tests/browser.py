"""The real app as a user meets it: ``chainlit run app.py`` and headless Chromium.

``AppServer`` starts the documented command in a subprocess (its own process group, so
the engine core goes down with it). ``Chat`` drives one browser tab and records the
websocket frames it receives, for ordering and counting.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import Browser, Locator, Page, WebSocket, expect

from bench.servers import Server, free_port

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
STATS_LINE = "tokens · first token"
ASSISTANT = '[data-step-type="assistant_message"]'
USER = '[data-step-type="user_message"]'


class AppServer(Server):
    """The app as ``chainlit run app.py`` serves it (waiting and stopping: ``Server``)."""

    @classmethod
    def start(cls, env: dict[str, str], log: Path) -> AppServer:
        port = free_port()
        clean = {k: v for k, v in os.environ.items() if not k.startswith("ERNIE_")}
        # Under nice: vLLM's CPU engine core and worker spin on both cores of a small
        # machine while generating, and the browser under test must still get CPU.
        command = [
            "nice",
            "-n",
            "15",
            sys.executable,
            "-m",
            "chainlit",
            "run",
            "app.py",
            "--headless",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        with log.open("wb") as out:
            process = subprocess.Popen(
                command,
                cwd=ROOT,
                env={**clean, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
                process_group=0,  # stop() ends the group; not a new session (see Server)
            )
        server = cls(f"http://127.0.0.1:{port}", process, log)
        server.wait("/", timeout_s=180)
        return server

    def readyz(self) -> tuple[int, dict[str, Any]]:
        response = httpx.get(f"{self.url}/readyz", timeout=5)
        return response.status_code, response.json()

    async def wait_for_running(self, count: int, *, within_s: float) -> None:
        """Wait until the engine holds ``count`` requests, polling without blocking."""
        deadline = time.monotonic() + within_s
        async with httpx.AsyncClient(timeout=5) as client:
            while True:
                body = (await client.get(f"{self.url}/readyz")).json()
                if body["running_requests"] == count:
                    return
                assert time.monotonic() < deadline, f"{body} after {within_s} s"
                await asyncio.sleep(0.02)


@dataclass
class Chat:
    """One browser tab on the app, with the Socket.IO events it received."""

    page: Page
    events: list[tuple[float, str, Any]] = field(default_factory=list)
    sent: list[tuple[float, str, Any]] = field(default_factory=list)  # from the page

    @classmethod
    async def open(cls, browser: Browser, url: str, locale: str = "en-US") -> Chat:
        context = await browser.new_context(locale=locale, viewport={"width": 1100, "height": 900})
        page = await context.new_page()
        chat = cls(page)
        page.on("websocket", chat._watch)
        await page.goto(url)
        await expect(page.locator("#chat-input")).to_be_visible(timeout=60_000)
        await chat.wait_for("task_end")  # the socket is connected and the chat started
        return chat

    async def wait_for(self, name: str, since: int = 0, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.named(name, since):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {name!r} event in {timeout_s} s")
            await asyncio.sleep(0.02)

    async def bold_texts(self, message: Locator) -> list[str]:
        """Texts rendered bold in ``message`` (Chainlit renders ** as a bold span)."""
        return list(
            await message.evaluate(
                """e => [...e.querySelectorAll('*')]
                .filter(n => n.children.length === 0
                             && parseInt(getComputedStyle(n).fontWeight) >= 600)
                .map(n => n.textContent)"""
            )
        )

    def _watch(self, ws: WebSocket) -> None:
        ws.on("framereceived", lambda payload: self._record(self.events, payload))
        ws.on("framesent", lambda payload: self._record(self.sent, payload))

    @staticmethod
    def _record(into: list[tuple[float, str, Any]], payload: str | bytes) -> None:
        text = payload if isinstance(payload, str) else payload.decode(errors="replace")
        if text.startswith("42"):  # a Socket.IO event: 42["name", data]
            name, *data = json.loads(text[2:])
            into.append((time.monotonic(), name, data[0] if data else None))

    def named(self, name: str, since: int = 0) -> list[tuple[float, str, Any]]:
        return [e for e in self.events[since:] if e[1] == name]

    async def send(self, text: str) -> int:
        """Send a message; return the event index it was sent at."""
        mark = len(self.events)
        await self.page.fill("#chat-input", text)
        await self.page.keyboard.press("Enter")
        return mark

    def assistant(self) -> Locator:
        return self.page.locator(ASSISTANT)

    async def reply_after(self, count: int, timeout_ms: float = 120_000) -> Locator:
        """The assistant message that carries the stats line, once there are ``count``."""
        done = self.assistant().filter(has_text=STATS_LINE)
        await expect(done).to_have_count(count, timeout=timeout_ms)
        return done.nth(count - 1)

    async def set_max_tokens(self, value: int, step: int = 16) -> None:
        await self.page.click("#chat-settings-open-modal")
        slider = self.page.locator("#max_tokens [role=slider]")
        await slider.focus()
        if value == int(await slider.get_attribute("aria-valuemax") or 0):
            await self.page.keyboard.press("End")
        else:
            await self.page.keyboard.press("Home")
            minimum = int(await slider.get_attribute("aria-valuemin") or 0)
            for _ in range((value - minimum) // step):
                await self.page.keyboard.press("ArrowRight")
        await expect(slider).to_have_attribute("aria-valuenow", str(value))
        await self.page.click("#confirm")
        await expect(self.page.get_by_role("dialog")).to_have_count(0)

    async def close(self) -> None:
        await self.page.context.close()
