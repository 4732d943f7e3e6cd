"""Chainlit's socket server from the inside: its handlers, engine.io's settings, a chat's
messages and task, and the sessions it keeps.

Every Socket.IO event gets one chain, built here: ``door(event, steps(chainlit's
handler))``, the app's steps outermost first (``chat.runtime`` states them in one dict).
Chainlit's own handlers are kept the first time (``_CHAINLIT``), so wiring again builds
from them, never around an earlier chain. A step named for an event Chainlit does not have
(an upgrade renamed it) stops the start.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

from chainlit.chat_context import chat_contexts
from chainlit.context import init_ws_context
from chainlit.server import sio
from chainlit.session import WebsocketSession, ws_sessions_id

__all__ = [
    "Handler",
    "Step",
    "chainlit_events",
    "chat_messages",
    "check_socket_origins",
    "close_socket",
    "enter",
    "new_thread",
    "receive",
    "run_as_task",
    "say",
    "session_by_id",
    "session_of",
    "session_task",
    "sessions_held",
    "size_frames",
    "trim_chat_messages",
    "wire",
]

Handler = Callable[..., Awaitable[Any]]
Step = Callable[[Handler], Handler]  # a handler around the next one

NAMESPACE = "/"  # Chainlit's one Socket.IO namespace
_CHAINLIT: dict[str, Handler] = {}  # Chainlit's own handlers, by event


def chainlit_events() -> set[str]:
    """The events Chainlit handles."""
    return set(_CHAINLIT) | set(sio.handlers[NAMESPACE])


def wire(door: Callable[[str, Handler], Handler], steps: Mapping[str, Sequence[Step]]) -> None:
    """Replace each of Chainlit's handlers with its chain (idempotent: built from
    Chainlit's own every time)."""
    handlers = sio.handlers[NAMESPACE]
    for event, handler in handlers.items():
        _CHAINLIT.setdefault(event, handler)
    unknown = set(steps) - set(_CHAINLIT)
    if unknown:
        raise RuntimeError(
            f"Chainlit has no socket event {sorted(unknown)}: see chat.chainlit_door"
        )
    for event, chainlit_handler in _CHAINLIT.items():
        handler = chainlit_handler
        for step in reversed(steps.get(event, ())):
            handler = step(handler)
        handlers[event] = door(event, handler)


async def receive(event: str, sid: str, *args: Any) -> Any:
    """What the server does when socket ``sid`` sends ``event``: its whole chain runs
    (the in-process tests drive the app so, ``testing.in_process``)."""
    return await sio.handlers[NAMESPACE][event](sid, *args)


async def close_socket(sid: str) -> None:
    """End the socket ``sid`` from the server (its disconnect chain runs)."""
    await sio.disconnect(sid)


def size_frames(max_bytes: int, *, ping_s: float) -> None:
    """Read frames up to ``max_bytes``; ping every ``ping_s`` and wait as long for the
    answer before the socket counts as gone."""
    sio.eio.max_http_buffer_size = max_bytes
    sio.eio.ping_interval = sio.eio.ping_timeout = ping_s


def check_socket_origins(accepts: Callable[[str | None, Mapping[str, Any]], bool]) -> None:
    """engine.io asks ``accepts(origin, environ)`` of every new socket."""
    sio.eio.cors_allowed_origins = accepts


def chat_messages(session_id: str) -> list[Any]:
    """The messages Chainlit keeps of this chat (its context: what an edit may name)."""
    return list(chat_contexts.get(session_id, []))


def trim_chat_messages(session_id: str, keep: int) -> None:
    """Keep only the chat's last ``keep`` messages in Chainlit's context (it keeps every
    one for the session's life; the model's history is the app's own record)."""
    messages = chat_contexts.get(session_id)
    if messages is not None and len(messages) > keep:
        del messages[:-keep]


def session_by_id(session_id: str) -> WebsocketSession | None:
    """The chat session ``session_id``, if this process holds it (open or kept)."""
    session: WebsocketSession | None = WebsocketSession.get_by_id(session_id)
    return session


def session_of(sid: str) -> WebsocketSession | None:
    """The session of socket ``sid``, if it has one."""
    session: WebsocketSession | None = WebsocketSession.get(sid)
    return session


def session_task(session: WebsocketSession) -> asyncio.Task[Any] | None:
    """The task Chainlit runs the session's current message in, if any."""
    task = session.current_task
    return task if isinstance(task, asyncio.Task) else None


def leaving(session: Any) -> bool:
    """The page asked Chainlit to clear its session (a new chat, not a reload: a reload
    just closes the socket)."""
    return bool(getattr(session, "to_clear", False))


def new_thread(session: WebsocketSession) -> None:
    """The session's chat is a new thread of the server's choosing (the one its page
    named, if any, is still the one Chainlit tries to resume: not found, it says so)."""
    session.thread_id = str(uuid.uuid4())


def enter(session: WebsocketSession) -> None:
    """This task works for ``session``: Chainlit's context (the chat's language, its
    user session, its emitter) is the session's from here on."""
    init_ws_context(session)


async def say(session: WebsocketSession, step: dict[str, Any]) -> None:
    """Show ``step`` on the session's socket outside any handler, as a task of its own
    (the page's input unlocks after it)."""
    emitter = init_ws_context(session).emitter
    await emitter.task_start()
    await emitter.send_step(step)  # type: ignore[arg-type]
    await emitter.task_end()


def run_as_task(session: WebsocketSession, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    """``work`` as the session's current task, as Chainlit runs a message's handler: the
    page shows it running (its stop button cancels it) until it ends."""
    emitter = init_ws_context(session).emitter

    async def run() -> None:
        await emitter.task_start()
        try:
            await work
        finally:
            await emitter.task_end()

    task = asyncio.create_task(run())
    session.current_task = task
    return task


def sessions_held() -> int:
    """The chat sessions Chainlit keeps in this process: open, or closed and kept."""
    return len(ws_sessions_id)
