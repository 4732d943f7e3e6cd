"""The app as a user meets it: headless Chromium (Debian's) on a running app.

``Chat`` drives one browser tab and records the Socket.IO events it receives, for
ordering and counting.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from playwright.async_api import Browser, Locator, Page, WebSocket, expect

from .polling import until
from .servers import ROOT

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "STATS_LINE", "Chat", "screenshot_path"]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
STATS_LINE = "tokens · first token"
ARTIFACTS = ROOT / "artifacts"  # the browser tests' screenshots
ASSISTANT = '[data-step-type="assistant_message"]'
USER = '[data-step-type="user_message"]'


def screenshot_path(name: str) -> str:
    ARTIFACTS.mkdir(exist_ok=True)
    return str(ARTIFACTS / name)


@dataclass
class Chat:
    """One browser tab on the app, with the Socket.IO events it received."""

    page: Page
    events: list[tuple[float, str, Any]] = field(default_factory=list)
    sent: list[tuple[float, str, Any]] = field(default_factory=list)  # from the page

    @classmethod
    async def open(
        cls,
        browser: Browser,
        url: str,
        locale: str = "en-US",
        headers: dict[str, str] | None = None,
    ) -> Chat:
        """A new tab (a browser of its own); ``headers`` go with its every request, the
        websocket's too (a trusted proxy's: the visitor's address, a signed-in user)."""
        viewport = {"width": 1100, "height": 900}
        context = await browser.new_context(
            locale=locale,
            viewport=viewport,
            extra_http_headers=headers,  # type: ignore[arg-type]
        )
        page = await context.new_page()
        chat = cls(page)
        page.on("websocket", chat._watch)
        await page.goto(url)
        await expect(page.locator("#chat-input")).to_be_visible(timeout=60_000)
        await chat.wait_for("task_end")  # the socket is connected and the chat started
        return chat

    async def wait_for(self, name: str, since: int = 0, timeout_s: float = 60) -> None:
        await until(lambda: self.named(name, since), timeout_s, f"{name!r} event", interval_s=0.02)

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
        await self.type(text)
        return await self.submit()

    async def type(self, text: str) -> None:
        """Type a message, not sent yet (``submit``: a loaded machine's typing is slow)."""
        await self.page.fill("#chat-input", text)

    async def submit(self) -> int:
        """Send what was typed; return the event index it was sent at."""
        mark = len(self.events)
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
