"""The web app in this process on a fake engine: Chainlit's own handlers, the app's own
chains (the front door, admission, arrival), a real session and emitter. Only the socket
is a list (what would have been sent to the page) and the engine ``engine.MockEngine``.

The end-to-end tests prove the real engine, server, browser and proxy; these prove the
handlers' logic in milliseconds.

Usage::

    async with app_on(MockEngine()) as app:
        page = app.open_page(address="127.0.0.2", language="zh-CN")
        await page.connect()                  # connection_successful: the chat starts
        await page.send("你好")                # client_message, through its whole chain
        page.shown("assistant_message")       # what the page shows now, oldest first
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from chainlit.server import app as chainlit_app
from chainlit.session import WebsocketSession

from chat import chainlit_door, open_app
from chat.runtime import Runtime
from engine import MockEngine, reply_slots
from settings.settings import Settings

from .polling import until

__all__ = ["InProcessApp", "Page", "app_on", "message_payload", "mock_engine"]

SETTLE_S = 5.0  # the longest a handler of a scripted engine may take


def mock_engine(reply: Any = None, *, chunk_delay_s: float = 0.0, **settings: Any) -> MockEngine:
    """A mock engine with these settings (as ``ERNIE_*`` would set them)."""
    values = Settings(_env_file=None, **settings)  # type: ignore[call-arg]
    extra: dict[str, Any] = {} if reply is None else {"reply": reply}
    return MockEngine(settings=values, chunk_delay_s=chunk_delay_s, **extra)


def message_payload(text: str, *, message_id: str | None = None) -> dict[str, Any]:
    """A ``client_message`` as Chainlit's page sends one."""
    return {
        "message": {
            "id": message_id or str(uuid.uuid4()),
            "threadId": "",
            "name": "User",
            "type": "user_message",
            "output": text,
            "createdAt": "2026-12-05T10:00:00.000Z",
        },
        "fileReferences": None,
    }


@dataclass
class Page:
    """One tab's socket: what it sent, and what it would show."""

    session: WebsocketSession
    events: list[tuple[str, Any]] = field(default_factory=list)

    @property
    def sid(self) -> str:
        return self.session.socket_id

    async def _emit(self, event: str, data: Any) -> None:
        self.events.append((event, data))

    async def receive(self, event: str, *args: Any) -> Any:
        """The server receives ``event`` from this tab: its whole chain runs in a task of
        its own with a context of its own, as python-socketio runs each event."""
        handled = chainlit_door.receive(event, self.sid, *args)
        return await asyncio.create_task(handled, context=contextvars.Context())

    async def connect(self) -> None:
        await self.receive("connection_successful")
        await self.settled()

    async def send(self, text: str, *, message_id: str | None = None) -> str:
        """Send a message and wait for its reply to end; the message's id."""
        payload = message_payload(text, message_id=message_id)
        await self.receive("client_message", payload)
        await self.settled()
        return str(payload["message"]["id"])

    async def drop(self) -> None:
        """The socket drops (a network change): the session is kept for its return."""
        await self.receive("disconnect", "transport close")

    async def come_back(self) -> None:
        """The socket comes back to its session, as Chainlit's ``connect`` restores it."""
        self.session.restore(new_socket_id=f"sid-{uuid.uuid4().hex}")
        await self.connect()

    async def close(self) -> None:
        """The tab closes: the session goes at once."""
        if chainlit_door.session_of(self.sid) is not None:
            await self.receive("clear_session")
            await self.receive("disconnect", "transport close")

    async def settled(self) -> None:
        """The session's current task (a message's, or the chat's start) has ended."""
        task = chainlit_door.session_task(self.session)
        if task is not None:
            await asyncio.wait_for(asyncio.shield(task), SETTLE_S)

    def shown(self, kind: str | None = None) -> list[dict[str, Any]]:
        """The steps on the page now (sent, streamed into, updated, not deleted)."""
        steps: dict[str, dict[str, Any]] = {}
        for event, data in self.events:
            if event in ("new_message", "update_message", "stream_start"):
                steps[data["id"]] = dict(steps.get(data["id"], {}), **data)
            elif event == "stream_token":
                step = steps.setdefault(data["id"], {"id": data["id"], "output": ""})
                old = "" if data.get("isSequence") else step.get("output", "")
                step["output"] = old + data["token"]
            elif event == "delete_message":
                steps.pop(data["id"], None)
        return [s for s in steps.values() if kind is None or s.get("type") == kind]

    def buttons(self) -> dict[str, dict[str, Any]]:
        """The actions on the page now, by id (sent, not removed)."""
        shown: dict[str, dict[str, Any]] = {}
        for event, data in self.events:
            if event == "action":
                shown[data["id"]] = data
            elif event == "remove_action":
                shown.pop(data["id"], None)
        live = {step["id"] for step in self.shown()}
        return {key: a for key, a in shown.items() if a.get("forId") in live}

    async def click(self, name: str) -> Any:
        """The page's button ``name`` clicked (``POST /project/action``), then settled."""
        (action,) = [a for a in self.buttons().values() if a["name"] == name]
        clicked = chainlit_door.run_action(self.session.id, action)
        result = await asyncio.create_task(clicked, context=contextvars.Context())
        await self.settled()
        return result

    def texts(self, kind: str = "assistant_message") -> list[str]:
        return [str(step.get("output", "")) for step in self.shown(kind)]

    def emitted(self, event: str) -> list[Any]:
        return [data for name, data in self.events if name == event]

    async def wait_for_text(self, words: str, kind: str = "assistant_message") -> str:
        """The first shown step of ``kind`` holding ``words``."""
        found = await until(
            lambda: next((t for t in self.texts(kind) if words in t), None), SETTLE_S, words
        )
        return str(found)


@dataclass
class InProcessApp:
    runtime: Runtime
    pages: list[Page] = field(default_factory=list)

    @property
    def engine(self) -> Any:
        return self.runtime.engine

    def open_page(
        self,
        *,
        address: str = "127.0.0.2",
        language: str = "en-US",
        user: Any = None,
        thread_id: str | None = None,
    ) -> Page:
        """A tab's socket, connected (as Chainlit's ``connect`` leaves it)."""
        sid, page = f"sid-{uuid.uuid4().hex}", None
        scope = {"type": "websocket", "client": (address, 50000), "headers": []}
        environ = {"HTTP_ACCEPT_LANGUAGE": language, "asgi.scope": scope}

        async def emit(event: str, data: Any) -> None:
            assert page is not None
            await page._emit(event, data)

        async def emit_call(kind: str, data: Any, timeout: int | None) -> None:
            return None

        session = WebsocketSession(
            id=str(uuid.uuid4()),
            socket_id=sid,
            emit=emit,  # type: ignore[arg-type]
            emit_call=emit_call,
            user_env={},
            client_type="webapp",
            environ=environ,
            user=user,
            thread_id=thread_id,
        )
        page = Page(session)
        self.pages.append(page)
        return page


@contextlib.asynccontextmanager
async def app_on(engine: MockEngine) -> AsyncIterator[InProcessApp]:
    """The web app configured on ``engine`` with its settings, sized as a launcher sizes it
    (the process's runtime put back afterwards)."""
    before = getattr(chainlit_app.state, "runtime", None)
    chainlit_app.state.runtime = None
    pages: list[Page] = []
    try:
        replies = reply_slots(engine.settings, engine.chats_at_once)
        app = InProcessApp(open_app(engine, engine.settings, replies), pages)
        engine.start()
        yield app
    finally:
        for page in pages:
            await page.close()
        await engine.shutdown()
        chainlit_app.state.runtime = before
        if before is not None:
            chainlit_door.wire(before.door.guard, before.steps)
