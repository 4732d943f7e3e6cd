"""Load shapes: traffic as it really arrives, against the real server, counted message by
message: sent, answered, refused with a message, and lost (neither: must be 0).

* ``at_connect``: chats that send the moment their socket connects (a starter clicked).
* ``back_to_back``: bursts, each burst's sockets closing while the next connects and sends.
* ``reconnect``: sockets dropped mid-reply (a phone changing networks) that come back to
  their session: the reply is shown in its final form, with a note of why it stopped.
* ``idle_tabs``: open tabs that say nothing, while chats run (``with_idle_tabs``).
* ``slow_reader``: a client that stops reading its socket mid-reply, while chats run; the
  server ends it (``SlowReader``).

Every chat speaks from a loopback address of its own (``testing.visitors``). The tests run
them small on the CPU; ``python -m bench --shapes`` runs them at scale.

Usage::

    tally = await at_connect(url, chats=16)
    assert tally.lost == 0, tally
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import websockets

from .chat_client import ChatClient, Reply
from .polling import until
from .visitors import visitor

__all__ = [
    "LONG_REPLY",
    "SlowReader",
    "Tally",
    "answer_to",
    "at_connect",
    "back_to_back",
    "reconnect",
    "reload",
    "thread_owned",
    "with_idle_tabs",
]

QUESTION = "请用三句话介绍一下杭州。"
LONG_REPLY = {"temperature": 0.8, "top_p": 0.8, "max_tokens": 4096, "system_prompt": "zh"}
REPLY_TIMEOUT_S = 300
FOOTER = "tokens/s"  # in a finished reply's stats line (English)


@dataclass
class Tally:
    """What became of the messages of one shape."""

    shape: str
    sent: int = 0
    answered: int = 0
    refused: int = 0
    ttft_s: list[float] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return self.sent - self.answered - self.refused

    def count(self, reply: Reply | None) -> None:
        """A sent message's outcome (None: nothing came back in time)."""
        self.sent += 1
        if reply is None:
            return
        if reply.error is not None:
            self.refused += 1
        elif reply.final is not None:
            self.answered += 1
            if reply.ttft_s is not None:
                self.ttft_s.append(reply.ttft_s)

    def ttft_p50_ms(self) -> float | None:
        return statistics.median(self.ttft_s) * 1000 if self.ttft_s else None

    def as_dict(self) -> dict[str, Any]:
        p50 = self.ttft_p50_ms()
        return {
            "shape": self.shape,
            "sent": self.sent,
            "answered": self.answered,
            "refused": self.refused,
            "lost": self.lost,
            "ttft_p50_ms": None if p50 is None else round(p50, 1),
        }


async def answer_to(
    chat: ChatClient, text: str, timeout_s: float = REPLY_TIMEOUT_S
) -> Reply | None:
    """The reply to ``text`` once final (or refused); None when nothing came in time."""
    try:
        reply = await chat.send(text, timeout_s=timeout_s)
        await until(lambda: reply.final is not None or reply.error, timeout_s, "the final reply")
    except (TimeoutError, AssertionError):
        return None
    return reply


async def at_connect(url: str, chats: int, *, text: str = QUESTION) -> Tally:
    """``chats`` chats at once, each sending the moment its socket connects."""
    tally = Tally("at connect")

    async def one() -> Reply | None:
        async with ChatClient.connect(url, source=visitor(), settle=False) as chat:
            return await answer_to(chat, text)

    for reply in await asyncio.gather(*(one() for _ in range(chats))):
        tally.count(reply)
    return tally


async def back_to_back(url: str, chats: int, bursts: int, *, text: str = QUESTION) -> Tally:
    """``bursts`` bursts of ``chats`` chats sending at connect; a burst's sockets close
    while the next burst connects and sends."""
    tally = Tally("back to back")
    closing: list[asyncio.Task[None]] = []
    for _ in range(bursts):
        stack = contextlib.AsyncExitStack()
        clients = await asyncio.gather(
            *(
                stack.enter_async_context(ChatClient.connect(url, source=visitor(), settle=False))
                for _ in range(chats)
            )
        )
        for reply in await asyncio.gather(*(answer_to(c, text) for c in clients)):
            tally.count(reply)
        closing.append(asyncio.create_task(stack.aclose()))  # while the next burst comes
    await asyncio.gather(*closing)
    return tally


async def reconnect(
    url: str,
    chats: int,
    *,
    headers: Callable[[int], dict[str, str]] | None = None,
    text: str = QUESTION,
) -> tuple[Tally, list[ChatClient]]:
    """``chats`` chats whose socket drops once their reply's text streams, and comes back
    to the same session (``headers(i)``: chat i's, a session cookie); answered: the
    reply's final form reached the chat after all."""
    tally = Tally("reconnect")
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                ChatClient.connect(url, headers=headers and headers(i), source=visitor())
            )
            for i in range(chats)
        ]

        async def one(chat: ChatClient) -> Reply | None:
            def said() -> bool:
                return bool(chat.reply and (chat.reply.frames or chat.reply.error))

            await chat.change_settings(LONG_REPLY)
            sending = asyncio.create_task(chat.send(text, timeout_s=REPLY_TIMEOUT_S))
            with contextlib.suppress(AssertionError):
                await until(
                    lambda: chat.reply and (chat.reply.frames or chat.reply.error), 60, "text"
                )
                if chat.reply and chat.reply.error:
                    return chat.reply  # refused: said so
                await chat.drop()
                await until(lambda: chat.connects >= 2, 60, "the socket back")
                reply = chat.reply
                await until(lambda: reply and reply.after_reconnect, 60, "the final reply back")
            sending.cancel()
            reply = chat.reply
            return reply if reply is not None and reply.after_reconnect else None

        for reply in await asyncio.gather(*(one(c) for c in clients)):
            tally.count(reply)
        return tally, clients


async def reload(url: str, chats: int, *, headers: Callable[[int], dict[str, str]]) -> Tally:
    """``chats`` pages reloaded once their reply's text streams: the page goes (its socket
    closed, its session kept) and a new one resumes the chat (``headers(i)``: chat i's
    session cookie; the history on). Answered: the reloaded page got the reply in full,
    followed there or already stored."""
    tally = Tally("reload")

    async def one(i: int) -> Reply | None:
        here = visitor()
        async with ChatClient.connect(url, headers=headers(i), source=here) as page:
            await page.change_settings(LONG_REPLY)
            sending = asyncio.create_task(page.send(QUESTION, timeout_s=REPLY_TIMEOUT_S))
            with contextlib.suppress(AssertionError):
                await until(
                    lambda: page.reply and (page.reply.frames or page.reply.error), 60, "text"
                )
            sending.cancel()
            reply, thread = page.reply, page.thread_id
        if reply is None or reply.error is not None or thread is None:
            return reply
        await until(lambda: thread_owned(url, thread, headers(i)), 30, "the thread stored")
        async with ChatClient.connect(
            url, headers=headers(i), thread_id=thread, source=here
        ) as again:
            steps = (again.resumed_thread or {}).get("steps", [])
            stored = [s["output"] for s in steps if FOOTER in str(s.get("output"))]
            with contextlib.suppress(AssertionError):
                found = stored or [
                    await again.wait_for_message(lambda m: FOOTER in m, timeout_s=REPLY_TIMEOUT_S)
                ]
                reply.final = found[-1]
        return reply

    for reply in await asyncio.gather(*(one(i) for i in range(chats))):
        tally.count(reply)
    return tally


async def thread_owned(url: str, thread: str, headers: dict[str, str]) -> bool:
    """The history holds ``thread`` as the signed-in user's (Chainlit names the owner in
    a task of its own once the first message arrived: a page reloads after it)."""
    async with httpx.AsyncClient(timeout=10) as client:
        return (await client.get(f"{url}/project/thread/{thread}", headers=headers)).is_success


@contextlib.asynccontextmanager
async def with_idle_tabs(url: str, tabs: int, per_address: int = 20) -> AsyncIterator[int]:
    """``tabs`` open tabs that say nothing, ``per_address`` from each address; how many."""
    async with contextlib.AsyncExitStack() as stack:
        opened = 0
        while opened < tabs:
            here = visitor()
            batch = min(per_address, tabs - opened)
            await asyncio.gather(
                *(
                    stack.enter_async_context(ChatClient.connect(url, source=here))
                    for _ in range(batch)
                )
            )
            opened += batch
        yield opened


class SlowReader:
    """A chat over a bare websocket that stops reading its socket once the reply's text
    starts: the server's writes to it back up, as to a phone that froze the page."""

    def __init__(self, url: str) -> None:
        self.url = url.replace("http://", "ws://") + "/ws/socket.io/?EIO=4&transport=websocket"
        self.ended_by_server = False

    @contextlib.asynccontextmanager
    async def stopped(
        self, text: str = QUESTION
    ) -> AsyncIterator[Callable[[float], Awaitable[bool]]]:
        """Send ``text``, stop reading at its first text; yield ``ended(after_s)``."""
        source = visitor()
        async with websockets.connect(self.url, local_addr=(source, 0)) as ws:
            await ws.recv()  # Engine.IO's open packet
            auth = {"clientType": "webapp", "sessionId": str(uuid.uuid4()), "userEnv": "{}"}
            await ws.send("40" + json.dumps(auth))
            await ws.send('42["connection_successful"]')
            message = {"id": str(uuid.uuid4()), "type": "user_message", "output": text}
            message["createdAt"] = datetime.now(UTC).isoformat()
            await ws.send("42" + json.dumps(["client_message", {"message": message}]))
            async with asyncio.timeout(REPLY_TIMEOUT_S):
                while not str(await ws.recv()).startswith('42["stream_'):
                    pass  # the chat's start, the thinking note: until the reply's text
            ws.transport.pause_reading()

            async def ended(after_s: float) -> bool:
                """Whether, ``after_s`` later, the server has closed the socket: read on
                (answering no ping), the close comes after what was sent before it."""
                await asyncio.sleep(after_s)
                ws.transport.resume_reading()
                with contextlib.suppress(websockets.ConnectionClosed, TimeoutError):
                    async with asyncio.timeout(10):
                        while True:
                            await ws.recv()
                self.ended_by_server = ws.close_code is not None
                return self.ended_by_server

            yield ended
