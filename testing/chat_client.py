"""A chat over Chainlit's own Socket.IO protocol, as a browser tab holds one.

A client speaks from its own loopback address (``source``: 127.0.0.2, ...); says
``connection_successful`` on every connect, reconnects included, as Chainlit's page does;
with ``settle=False``, may send the moment its socket connects (a starter clicked).

Usage::

    async with ChatClient.connect(url, source="127.0.0.2") as chat:   # a new tab
        reply = await chat.send("你好")             # the streamed reply and its timings
    async with ChatClient.connect(url, headers=cookie, thread_id=chat.thread_id) as again:
        again.resumed_thread                        # a chat from the history, resumed
    async with ChatClient.connect(url, settle=False) as eager:
        await eager.send("你好")                    # sent at once, before the chat started
    status, body = await chat.http("POST", "/project/action", json=...)  # as the page posts
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
import httpx
import socketio

from .polling import until
from .reply import Reply

__all__ = ["ChatClient", "Reply", "wait_ready"]

START_TIMEOUT_S = 60  # from connecting to the chat's start handler's end
# Chainlit acknowledges a connection with a task_end, then runs the app's chat start
# handler (if it has one) as a task: its task_start follows within milliseconds.
# python-socketio gives the namespace 1 s to connect; hundreds of chats opening at once
# (each running the app's chat start) can take longer on a loaded server
CONNECT_TIMEOUT_S = 30


class ChatClient:
    def __init__(self, sio: socketio.AsyncClient, http: aiohttp.ClientSession) -> None:
        self._sio = sio
        self._http = http  # the tab's own: its cookies (a group's worker), its address
        self.url, self._headers = "", dict[str, str]()  # the app's, and the handshake's
        self._reply, self._reply_id = None, None  # type: tuple[Reply | None, str | None]
        self._done = asyncio.Event()
        self._started = asyncio.Event()  # the chat's start (or resume) task ended
        self._tasks: list[str] = []  # task_start and task_end, as they came
        self.streamed_ids: set[str] = set()  # every message id this chat was streamed
        self.session_id = str(uuid.uuid4())  # Chainlit's id of this chat's session
        self.thread_id: str | None = None  # the chat's id in the history, once it has one
        self.resumed_thread: dict[str, Any] | None = None  # what the app sent to resume
        self.resumes = 0  # how often the app sent it
        self.messages: list[str] = []  # every message the app sent this chat, in order
        self.shown_ids: set[str] = set()  # the ids of the messages it sent or updated
        events = ("stream_start", "stream_token", "new_message", "task_start", "task_end")
        events += ("resume_thread", "resume_thread_error", "update_message", "connect")
        for event in (*events, "disconnect"):
            sio.on(event, getattr(self, f"_on_{event}"))
        self._resuming = False  # a resumed chat has started once the app sent it
        self.connects = self.disconnects = 0  # the socket's connections and their ends

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        thread_id: str | None = None,
        source: str | None = None,
        settle: bool = True,
        handshake: dict[str, Any] | None = None,
    ) -> AsyncIterator[ChatClient]:
        """A new chat, or with ``thread_id`` one resumed from the history; ``headers`` go
        with the websocket handshake (a session cookie); ``source``: the loopback address
        it speaks from; ``settle``: wait for the chat's start before handing it over (an
        app without a chat start handler: pass False); ``handshake``: fields of Socket.IO's
        ``auth`` as a client that is not the page may set them (a session id of its own)."""
        local = None if source is None else (source, 0)
        connector = aiohttp.TCPConnector(local_addr=local)
        jar = aiohttp.CookieJar(unsafe=True)  # an IP host's worker cookie kept, as a browser
        async with aiohttp.ClientSession(connector=connector, cookie_jar=jar) as http:
            sio = socketio.AsyncClient(http_session=http, reconnection_delay=0.5)
            opened = cls._opened(sio, http, url, headers, thread_id, settle, handshake or {})
            async with opened as client:
                yield client

    @classmethod
    @contextlib.asynccontextmanager
    async def _opened(
        cls,
        sio: socketio.AsyncClient,
        http: aiohttp.ClientSession,
        url: str,
        headers: dict[str, str] | None,
        thread_id: str | None,
        settle: bool,
        handshake: dict[str, Any],
    ) -> AsyncIterator[ChatClient]:
        client = cls(sio, http)
        client.url, client._headers = url, dict(headers or {})
        client._resuming = thread_id is not None
        client.session_id = handshake.get("sessionId", client.session_id)
        auth = {
            "clientType": "webapp",
            "sessionId": client.session_id,
            "threadId": thread_id,
            "userEnv": "{}",
            "chatProfile": None,
        } | handshake
        await sio.connect(
            url,
            socketio_path="/ws/socket.io",
            auth=auth,
            transports=["websocket"],
            headers=dict(headers or {}),  # engine.io takes the cookie out of the dict
            wait_timeout=CONNECT_TIMEOUT_S,
        )
        try:
            if settle:
                await client._settle()  # the chat's start (or resume) handler has run
            yield client
        finally:
            await sio.disconnect()

    async def http(self, method: str, path: str, **options: Any) -> tuple[int, str]:
        """A request as the tab's page makes it (its cookies, address, headers)."""
        options["headers"] = self._headers | dict(options.get("headers", {}))
        async with self._http.request(method, f"{self.url}{path}", **options) as answer:
            return answer.status, await answer.text()

    def seen(self, step_id: str) -> bool:
        """Whether the app sent this chat a message of ``step_id`` (new, updated, resumed)."""
        resumed = [s.get("id") for s in (self.resumed_thread or {}).get("steps") or []]
        return step_id in self.shown_ids or step_id in resumed

    async def _on_connect(self) -> None:
        self.connects += 1
        await self._sio.emit("connection_successful")  # as the page does on every connect

    async def _on_disconnect(self, *_: Any) -> None:
        self.disconnects += 1

    async def wait_for_message(
        self, matches: Callable[[str], bool], *, since: int = 0, timeout_s: float = 60
    ) -> str:
        """The first message the app sent this chat (from index ``since``) that matches."""

        def found() -> str | None:
            return next((m for m in self.messages[since:] if matches(m)), None)

        return str(await until(found, timeout_s, "the awaited message", interval_s=0.02))

    async def emit(self, event: str, data: Any) -> None:
        """A hand-made event, as a client that is not the page may send."""
        await self._sio.emit(event, data)

    @property
    def reply(self) -> Reply | None:
        """The reply in progress (or the last one), as it stands."""
        return self._reply

    async def change_settings(self, values: dict[str, Any]) -> None:
        """What the settings panel's confirm button sends (every widget's value), once
        the app has taken it: Socket.IO acknowledges an event when its handler returned
        (a person, who closes the panel and then types, never sends before that)."""
        await self._sio.call("chat_settings_change", values, timeout=CONNECT_TIMEOUT_S)

    async def stop(self) -> None:
        """What the stop button sends."""
        await self._sio.emit("stop")

    async def drop(self) -> None:
        """Lose the connection as a network or proxy does: the websocket closes, with no
        Socket.IO goodbye (the client then reconnects as a browser would)."""
        await self._sio.eio.ws.close()

    async def send(
        self, text: str, *, timeout_s: float = 600, step: dict[str, Any] | None = None
    ) -> Reply:
        """Send a message and wait for the app to finish answering it (or for its error);
        ``step``: fields a client may set as it likes (type, metadata), as an attacker."""
        self._reply, self._reply_id = Reply(sent_at=time.monotonic()), None
        self._done.clear()
        message = {
            "id": str(uuid.uuid4()),
            "threadId": "",
            "name": "User",
            "type": "user_message",
            "output": text,
            "createdAt": datetime.now(UTC).isoformat(),
        } | (step or {})
        # A page holds what is typed while its socket is down and sends it once back.
        await until(self._connected, timeout_s, "the socket back", interval_s=0.05)
        await self._sio.emit("client_message", {"message": message, "fileReferences": []})
        await asyncio.wait_for(self._done.wait(), timeout_s)
        return self._reply

    def _connected(self) -> bool:
        return bool(self._sio.connected and "/" in self._sio.namespaces)

    async def _on_update_message(self, step: dict[str, Any]) -> None:
        """A reply in its final form again (it ended while the socket was gone), or a notice
        updated in place (a place in line)."""
        self.messages.append(step.get("output") or "")
        self.shown_ids.add(str(step.get("id")))
        if self._reply is not None and step.get("id") == self._reply_id:
            self._final(step["output"])

    async def _on_resume_thread(self, thread: dict[str, Any]) -> None:
        self.resumed_thread = thread
        self.resumes += 1
        self._started.set()

    async def _on_resume_thread_error(self, *_: Any) -> None:
        self._started.set()  # resumed_thread stays None: the app could not resume it

    @property
    def reply_id(self) -> str | None:  # the reply in progress (or the last), once it streams
        return self._reply_id

    async def _on_stream_start(self, step: dict[str, Any]) -> None:
        self.streamed_ids.add(step["id"])
        self.thread_id = step.get("threadId") or self.thread_id
        if self._reply is None:
            return
        self._reply_id = step["id"]
        self._text_arrived(step.get("output") or "")

    async def _on_stream_token(self, data: dict[str, Any]) -> None:
        self.streamed_ids.add(data["id"])
        if self._reply is not None and data.get("id") == self._reply_id:
            self._text_arrived(data["token"])

    def _text_arrived(self, text: str) -> None:
        assert self._reply is not None
        self._reply.frames.append(text)
        self._reply.frame_at.append(time.monotonic())
        if self._reply.first_text_at is None:
            self._reply.first_text_at = time.monotonic()

    async def _on_new_message(self, step: dict[str, Any]) -> None:
        self.thread_id = step.get("threadId") or self.thread_id
        self.messages.append(step.get("output") or "")
        self.shown_ids.add(str(step.get("id")))
        if self._reply is None:
            return
        if step.get("id") == self._reply_id:
            self._final(step["output"])
        elif step.get("isError"):
            self._reply.error = step["output"]

    def _final(self, text: str) -> None:
        assert self._reply is not None
        self._reply.final = text
        self._reply.after_reconnect = self._reply.after_reconnect or self.connects > 1

    async def _settle(self) -> None:
        """Until the app is ready for a message, as a browser tab waits."""
        if self._resuming:
            await asyncio.wait_for(self._started.wait(), START_TIMEOUT_S)
            return
        await until(lambda: "start" in self._tasks, START_TIMEOUT_S, "chat start", interval_s=0.01)
        await until(lambda: self._tasks[-1] == "end", START_TIMEOUT_S, "chat start's end")

    async def _on_task_start(self, *_: Any) -> None:
        self._tasks.append("start")

    async def _on_task_end(self, *_: Any) -> None:
        self._tasks.append("end")
        # The reply's task, not the chat start's: under load that one can end after the
        # message was sent. A message answered with an error has no text.
        if self._reply is not None and (
            self._reply.first_text_at is not None or self._reply.error is not None
        ):
            self._reply.ended_at = time.monotonic()
            self._done.set()


async def wait_ready(url: str, timeout_s: float) -> dict[str, Any]:
    """Poll ``/readyz`` until 200 (its body), or fail with the app's reason."""

    async def ready(client: httpx.AsyncClient) -> dict[str, Any] | None:
        # ValueError: a proxy's own page while its workers restart (not the app's JSON)
        with contextlib.suppress(httpx.HTTPError, ValueError):
            response = await client.get(f"{url}/readyz")
            body: dict[str, Any] = response.json()
            if body.get("state") == "failed":
                raise RuntimeError(f"engine failed: {body.get('reason')}")
            return body if response.status_code == 200 else None
        return None

    async with httpx.AsyncClient(timeout=5) as client:
        return dict(await until(lambda: ready(client), timeout_s, f"ready {url}", interval_s=0.5))
