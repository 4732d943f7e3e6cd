"""The chat's handlers, as the UI sees them: a chat opens, a message arrives, a reply
streams, the stop button, a closed tab or a dropped socket, the settings panel.

Each handler reads the chat's state, calls the engine, and renders; what a reply looks
like is ``chat.ui.streaming``, the words are ``chat.ui.render`` and the translations. A message
reaches ``answer`` only once the front door admitted it (``chat.access.admission``), and
whichever of ``start_chat`` and ``answer`` runs first sets the chat up (``this_chat``):
the order events arrive in is not theirs to rely on (``chat.arrival``). Every handler
reports what it did not expect (``chat.ui.failures``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import chainlit as cl
from chainlit.types import ThreadDict

from engine import ChatOptions, EngineFailedError, EngineRestartingError, MessageRefusedError

from . import lifecycle, metrics
from .access.admission import visitor
from .access.quota import LOW_SHARE
from .access.turns import LeftLineError, Ticket
from .chainlit_door import (
    WebsocketSession,
    answer_messages,
    leaving,
    run_as_task,
    trim_chat_messages,
)
from .conversation import Conversation, last_reply_step
from .errors import LimitExceededError, PanelValueError
from .runtime import Runtime, runtime
from .ui.failures import reported, send_error
from .ui.live import LiveReply
from .ui.panel import options_from
from .ui.state import chat_state
from .ui.streaming import (
    EXPORT,
    REGENERATE,
    Spend,
    announce_engine,
    follow_reply,
    offer_buttons,
    remove_reply,
    show_notice,
    stream_reply,
    wait_in_line,
)
from .words import DEFAULT_LANGUAGE, strings_for, t

__all__ = ["reconnected", "resume_chat", "resumed"]

CONTEXT_KEPT = 100  # messages of Chainlit's context a chat keeps (edits of recent ones)


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
@reported
async def start_chat() -> None:
    this_chat()


@reported
async def resume_chat(thread: ThreadDict) -> None:
    """A chat from the history: what it recorded becomes the model's history again
    (registered only when the history is on: ``chat.history``). A reply still being
    written for it (the page was reloaded) is sent with the thread as it stands, and
    followed once the page has it (``resumed``)."""
    user = getattr(cl.context.session.user, "identifier", None)
    live = None if user is None else runtime().live.of(user, thread["id"])
    seal = runtime().seal
    if live is not None:
        thread["steps"].append(live.message.to_dict())
    state = chat_state()
    state.following, state.resumed_reply = live, last_reply_step(thread["steps"], seal)
    open_chat(Conversation.restore(thread["steps"], seal))


async def resumed() -> None:
    """The page has its resumed thread: the reply being written is followed there, or the
    last reply gets its buttons."""
    state = chat_state()
    if state.following is not None:
        state.follower = asyncio.ensure_future(follow(state.following))
    elif state.resumed_reply is not None:
        await offer_buttons(state, state.resumed_reply)


@reported
async def follow(live: LiveReply) -> None:
    """``live`` on this page to its end; its exchange then joins this chat's."""
    metadata = await follow_reply(chat_state(), live)
    if metadata is not None:
        this_chat().adopt(metadata)


def this_chat() -> Conversation:
    """This chat's conversation, set up on first use (once, by whichever comes first)."""
    conversation = chat_state().conversation
    if conversation is None:
        conversation = Conversation(runtime().seal)
        open_chat(conversation)
    return conversation


def open_chat(conversation: Conversation) -> None:
    """A new or resumed chat: its state, and the engine's state shown."""
    metrics.CHATS_OPEN.inc()
    state = chat_state()
    state.conversation, state.options = conversation, ChatOptions()
    # In the background: Chainlit locks the message box while a handler runs, and a
    # message typed while the model loads must be accepted (and answered once ready).
    rt = runtime()
    state.announcer = asyncio.create_task(announce_engine(rt.engine, rt.settings))


@cl.on_settings_update
@reported
async def update_settings(values: dict[str, Any]) -> None:
    try:
        chat_state().options = options_from(values, runtime().settings)
    except PanelValueError as exc:  # not from the panel: say so, change nothing
        await send_error(exc)


@reported
async def answer(message: cl.Message) -> None:
    conversation = this_chat()
    conversation.rewind_to(message.id)  # an edited message answers again from there
    if message.elements:  # a text model: say so, and answer the text
        await cl.Message(content=t("files_ignored")).send()
    try:
        ticket = runtime().limits.take(message.id)  # the front door's (chat.access.turns)
        await answer_when_ready(message.id, message.content, conversation, ticket)
    except MessageRefusedError as exc:  # too many tokens (the front door counted chars)
        await send_error(exc)
    finally:
        trim_chat_messages(cl.context.session.id, CONTEXT_KEPT)


answer_messages(answer)  # as @cl.on_message, without its step (chat.chainlit_door)


@cl.action_callback(REGENERATE)
@reported
async def regenerate(_: cl.Action) -> None:
    """The button under the last reply: that turn answered again, as a message's reply
    runs (the stop button stops it), the old reply gone from the chat and the history.
    The button's payload is the page's: the session's own record says what to answer."""
    state, conversation, rt = chat_state(), this_chat(), runtime()
    reply, last = state.last_reply, conversation.last()
    if reply is None or last is None or state.request_id:
        return  # nothing answered yet, or a reply is being written
    session = cl.context.session
    assert isinstance(session, WebsocketSession)  # a button of a chat's socket
    try:  # a reply as any other: the visitor's limits and the line hold
        ticket = await rt.limits.admit(visitor(session, rt.trust))
    except LimitExceededError as exc:
        await send_error(exc)
        return
    state.replace_last_reply(None)
    await remove_reply(reply)
    message_id, text = last
    conversation.rewind_to(message_id)
    task = run_as_task(session, answer_when_ready(message_id, text, conversation, ticket))
    task.add_done_callback(lambda _: rt.limits.release(ticket))


@cl.action_callback(EXPORT)
@reported
async def export(_: cl.Action) -> None:
    """The button under the last reply: links to this chat as Markdown and as JSON."""
    token = runtime().exports.token_for(cl.context.session.id)
    links = {kind: f"/export/{token}/chat.{kind}" for kind in ("md", "json")}
    await show_notice(t("export_links", markdown=links["md"], json=links["json"]))


async def answer_when_ready(
    message_id: str, text: str, conversation: Conversation, ticket: Ticket | None
) -> None:
    """The reply, once the engine is ready and the message's turn in line came."""
    engine = runtime().engine
    try:
        await engine.wait_ready()  # queued while the model loads
    except (EngineFailedError, EngineRestartingError) as exc:
        await send_error(exc)
        return
    state = chat_state()
    if state.announcer is not None:  # its "ready" and demo notices come before the reply
        # wait() neither re-raises the announcer's end (cancelled when a socket dropped
        # and the chat was restored) nor cancels it if this message is stopped.
        await asyncio.wait({state.announcer})
    if state.follower is not None:  # a reply being written when the page was reloaded
        await asyncio.wait({state.follower})
    try:
        if abandoned():  # its tab went away while the model loaded: a reply for nobody
            raise LeftLineError(cl.context.session.id)
        state.waited_s = 0.0
        if ticket is not None:
            await wait_in_line(runtime().limits, ticket)
            state.waited_s = max(0.0, (ticket.started or ticket.joined) - ticket.joined)
    except LeftLineError:
        state.left_line = True  # said if the socket comes back
        return
    rt = runtime()
    live = rt.live if rt.history_url is not None else None
    turn, spend = (message_id, text), _spender(rt)
    await stream_reply(engine, rt.settings, turn, conversation, state, live, spend=spend)


def _spender(rt: Runtime) -> Spend | None:
    """What counts a reply's tokens against its visitor's day (None: no daily quota):
    the tokens left and the day's, once fewer than a fifth are left."""
    quota, session = rt.limits.quota, cl.context.session
    if quota is None or not isinstance(session, WebsocketSession):
        return None
    who = visitor(session, rt.trust)

    async def spend(tokens: int) -> tuple[int, int] | None:
        share = await quota.spend(who, tokens)
        return (quota.left(share), quota.per_day) if share < LOW_SHARE else None

    return spend


@cl.on_stop
@reported
async def stop_reply() -> None:
    metrics.STOPS.inc()
    await abort_current_reply()


@cl.on_chat_end
@reported
async def end_chat() -> None:
    """A page gone (reloaded, closed) or a dropped socket. With the history on, its reply
    is written to its end and stored (a reloaded page follows it: ``chat.ui.live``);
    without, or for a new chat, the engine is freed at once (a reply stopped so says why
    when the socket comes back: ``reconnected``)."""
    metrics.CHATS_OPEN.dec()
    state = chat_state()
    for task in state.dropped():
        task.cancel()
    if abandoned():
        state.lose_reply()
        await abort_current_reply()
        runtime().limits.leave(cl.context.session.id)  # its messages waiting in line


def abandoned() -> bool:
    """The chat's page went away and nothing will show its replies: no history to keep
    them for a reload, or the page started a new chat."""
    return chat_state().gone and (runtime().history_url is None or leaving(cl.context.session))


async def reconnected() -> None:
    """The chat's socket came back (``chat.arrival``): the chat is open again, and a reply
    that ended while it was gone is shown in its final form."""
    metrics.CHATS_OPEN.inc()
    missed, left_line = chat_state().returned()
    if missed is not None:
        await missed.update()
    if left_line:
        await show_notice(t("line_left"))


async def abort_current_reply() -> None:
    request_id = chat_state().request_id
    if request_id:
        await runtime().engine.abort(request_id)
