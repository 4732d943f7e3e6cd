"""The chat's handlers, as the UI sees them: a chat opens, a message arrives, a reply
streams, the stop button, a closed tab, the settings panel.

Each handler reads the chat's state, calls the engine, and renders; what a reply looks
like is ``chat.streaming``, the words are ``chat.render`` and the translations.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import chainlit as cl
from chainlit.types import ThreadDict

from engine import ChatOptions, EngineFailedError, EngineRestartingError, MessageRefusedError

from . import lifecycle, metrics
from .conversation import Conversation
from .i18n import DEFAULT_LANGUAGE, strings_for, t
from .limits import LimitExceededError
from .panel import PanelValueError, options_from
from .runtime import runtime
from .streaming import announce_engine, send_error, stream_reply

__all__ = ["resume_chat"]


@cl.on_app_startup
async def start_app() -> None:
    await lifecycle.start(runtime())


@cl.on_app_shutdown
async def stop_app() -> None:
    await lifecycle.stop(runtime())


@cl.set_starters
async def starters(user: Any = None, language: str | None = None) -> list[cl.Starter]:
    entries = strings_for(language or DEFAULT_LANGUAGE).table["starters"]
    return [cl.Starter(label=s["label"], message=s["message"]) for s in entries]


@cl.on_chat_start
async def start_chat() -> None:
    open_chat(Conversation(runtime().seal))


async def resume_chat(thread: ThreadDict) -> None:
    """A chat from the history: what it recorded becomes the model's history again
    (registered only when the history is on: ``chat.history``)."""
    open_chat(Conversation.restore(thread["steps"], runtime().seal))


def open_chat(conversation: Conversation) -> None:
    """A new or resumed chat: its state, and the engine's state shown."""
    metrics.CHATS_OPEN.inc()
    cl.user_session.set("conversation", conversation)
    cl.user_session.set("options", ChatOptions())
    # In the background: Chainlit locks the message box while a handler runs, and a
    # message typed while the model loads must be accepted (and answered once ready).
    announcer = asyncio.create_task(announce_engine(runtime().engine))
    cl.user_session.set("announcer", announcer)


@cl.on_settings_update
async def update_settings(values: dict[str, Any]) -> None:
    try:
        cl.user_session.set("options", options_from(values, runtime().engine))
    except PanelValueError as exc:  # not from the panel: say so, change nothing
        await send_error(exc)


@cl.on_message
async def answer(message: cl.Message) -> None:
    metrics.MESSAGES.inc()
    rt = runtime()
    conversation: Conversation = cl.user_session.get("conversation")
    conversation.rewind_to(message.id)  # an edited message answers again from there
    if message.elements:  # a text model: say so, and answer the text
        await cl.Message(content=t("files_ignored")).send()
    user = limited_user()
    try:
        rt.limits.admit(user, now=time.monotonic())  # every message counts, refused or not
    except LimitExceededError as exc:
        await send_error(exc)
        return
    try:
        text = rt.engine.check_message(message.content)
        await answer_when_ready(message.id, text, conversation)
    except MessageRefusedError as exc:
        await send_error(exc)
    finally:
        rt.limits.done(user)


async def answer_when_ready(message_id: str, text: str, conversation: Conversation) -> None:
    engine = runtime().engine
    try:
        await engine.wait_ready()  # queued while the model loads
    except (EngineFailedError, EngineRestartingError) as exc:
        await send_error(exc)
        return
    announcer = cl.user_session.get("announcer")
    if announcer is not None:  # its "ready" and demo notices come before the reply
        # wait() neither re-raises the announcer's end (cancelled when a socket dropped
        # and the chat was restored) nor cancels it if this message is stopped.
        await asyncio.wait({announcer})
    options = cl.user_session.get("options")
    await stream_reply(engine, message_id, text, conversation, options)


def limited_user() -> str:
    """Whom the per-user limits count: the signed-in user, else the client's address
    (a new tab is no new allowance; a trusted proxy's forwarded address counts)."""
    user = cl.user_session.get("user")
    if user:
        return f"user:{user.identifier}"
    environ = getattr(cl.context.session, "environ", None) or {}
    return f"address:{runtime().trust.address_of_environ(environ)}"


@cl.on_stop
async def stop_reply() -> None:
    metrics.STOPS.inc()
    await abort_current_reply()


@cl.on_chat_end
async def end_chat() -> None:
    metrics.CHATS_OPEN.dec()
    await abort_current_reply()  # a closed tab or dropped socket frees the engine at once
    announcer = cl.user_session.get("announcer")
    if announcer is not None:
        announcer.cancel()


async def abort_current_reply() -> None:
    request_id = cl.user_session.get("request_id")
    if request_id:
        await runtime().engine.abort(request_id)
