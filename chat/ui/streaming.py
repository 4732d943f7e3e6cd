"""A reply as the chat shows it: the thinking indicator, buffered text, then its footer.

Also the chat's engine notices (loading, ready, failed) and its error messages.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import chainlit as cl

from engine import (
    ChatClient,
    EngineError,
    EngineState,
    ReplyEnd,
    TextChunk,
    new_request_id,
)
from settings.settings import Settings

from .. import metrics
from ..access.turns import Place, ReplyLine, Ticket
from ..chainlit_door import action_names, delete_step, send_step, update_step
from ..conversation import NOTES_KEY, Conversation
from ..words import chat_strings, t
from .failures import send_error
from .live import LiveReplies, LiveReply
from .panel import send_settings_panel
from .render import engine_notes, final_reply, footer_notes, line_text, loading_text
from .state import ChatState

__all__ = [
    "EXPORT",
    "REGENERATE",
    "SHARE",
    "Spend",
    "announce_engine",
    "follow_reply",
    "offer_buttons",
    "remove_reply",
    "show_notice",
    "stream_reply",
    "wait_in_line",
]

# Counts a reply's tokens against its visitor's day: the tokens left and the day's, once
# few are left (chat.access.quota); None: plenty, or no quota.
Spend = Callable[[int], Awaitable[tuple[int, int] | None]]

LOADING_REFRESH_S = 1.0
FOLLOW_S = 0.2  # how often a reloaded page is shown its reply's new text
REGENERATE = "regenerate"  # the actions under the last reply (chat.handlers)
EXPORT = "export"
SHARE = "share"  # where sharing is on (chat.sharing registers it)


async def announce_engine(engine: ChatClient, settings: Settings) -> None:
    """The loading state, updated in place until ready or failed; then the chat's tools."""
    status = engine.status()
    loading = status.state is EngineState.LOADING
    notice = cl.Message(content=loading_text(status, chat_strings()))
    if loading:
        await notice.send()
        while status.state is EngineState.LOADING:
            with contextlib.suppress(TimeoutError, EngineError):  # wakes at once when settled
                await asyncio.wait_for(engine.wait_ready(), LOADING_REFRESH_S)
            status = engine.status()
            notice.content = loading_text(status, chat_strings())
            await notice.update()
    ready = status.state is EngineState.READY
    demo = ready and engine.model.is_demo
    notice.content = "\n\n".join(
        engine_notes(status, chat_strings(), loaded_now=loading, demo=demo)
    )
    if notice.content:
        await (notice.update() if loading else notice.send())
    if ready:
        await send_settings_panel(settings, engine.model)


async def wait_in_line(turns: ReplyLine, ticket: Ticket) -> None:
    """Until the message's turn: its place and wait shown, updated in place as the line
    moves (a passing notice, gone when the reply starts); ``LeftLineError`` if the chat
    went away meanwhile (``ReplyLine.leave``)."""
    notice = cl.Message(content="")

    async def show(place: Place) -> None:
        shown = bool(notice.content)
        notice.content = line_text(place, chat_strings())
        step = notice.to_dict()
        await (update_step(step) if shown else _show(notice))

    try:
        await turns.wait_turn(ticket, show, chat=cl.context.session.id)
    finally:
        if notice.content:
            with contextlib.suppress(Exception):  # the chat may be gone (a closed tab)
                await _hide(notice)


async def stream_reply(
    engine: ChatClient,
    settings: Settings,
    turn: tuple[str, str],
    conversation: Conversation,
    state: ChatState,
    live: LiveReplies | None = None,
    *,
    spend: Spend | None = None,
) -> None:
    """The reply to ``turn`` (the message's id and text): thinking indicator until the
    first text, buffered chunks, then notes and stats; with ``live`` (the history is on),
    a page reloaded meanwhile follows it, and the reply is the child of a run of its own
    (Chainlit shows 👍 / 👎 under a run's reply, and keeps the feedback on the run);
    ``spend`` counts its tokens against the visitor's day."""
    run = None if live is None else cl.Step(name="reply", type="run", show_input=False)
    if run is not None:
        await run.send()
    reply = cl.Message(content="", parent_id=None if run is None else run.id)
    session = cl.context.session
    user = getattr(session.user, "identifier", None)
    writing = None if live is None or user is None else live.writing(user, session.thread_id, reply)
    with writing or contextlib.nullcontext():
        await _write(engine, settings, reply, turn, conversation, (state, spend))


async def follow_reply(state: ChatState, live: LiveReply) -> dict[str, Any] | None:
    """A reply another session of this chat writes (``chat.ui.live``), on this page: each
    change in place, then its final form with its buttons. Its metadata (the exchange),
    or None if it ended with no text."""
    message, shown = live.message, live.message.content
    while not live.ended:
        await asyncio.sleep(FOLLOW_S)
        if message.content != shown:
            shown = message.content
            await update_step(message.to_dict())
    if not message.content:  # it failed before any text (the error was said there)
        await _hide(message)
        return None
    await update_step(message.to_dict())
    await offer_buttons(state, message.to_dict())
    return dict(message.metadata or {})


async def offer_buttons(state: ChatState, step: Mapping[str, Any]) -> None:
    """A resumed chat's last reply (``step``, from the history) gets the buttons a reply
    gets when it ends: regenerate and export work on a chat opened from the sidebar too."""
    await _last_reply_is(
        state, cl.Message(content=str(step.get("output") or ""), id=step["id"]), sent=True
    )


async def _write(
    engine: ChatClient,
    settings: Settings,
    reply: cl.Message,
    turn: tuple[str, str],
    conversation: Conversation,
    chat: tuple[ChatState, Spend | None],
) -> None:
    (message_id, text), (state, spend) = turn, chat
    request_id, options = new_request_id(), state.options
    state.begin_reply(request_id)
    thinking = cl.Message(content=t("thinking"))
    await _show(thinking)
    end = None
    metrics.REPLYING.inc()  # until the engine let the request go (the finally below)
    try:
        events = engine.chat(conversation.turns(), text, request_id=request_id, options=options)
        async with contextlib.aclosing(events) as stream:
            async for event in stream:
                if isinstance(event, TextChunk):
                    if not reply.streaming:
                        await _hide(thinking)
                    await reply.stream_token(event.text)
                elif isinstance(event, ReplyEnd):
                    end = event
                    metrics.record_reply(end, waited_s=state.waited_s)
    except asyncio.CancelledError:  # the stop button or a closed chat: keep what was said
        if end is None:  # cancelled before the engine's abort came back (a reader asleep)
            metrics.record_cancelled_reply()
        reply.metadata = conversation.record(message_id, text, reply.content)
        streamed = reply.streaming
        with contextlib.suppress(Exception):  # the chat may be gone (a closed tab)
            await (reply.update() if streamed else _hide(thinking))  # and stored
            # the stopped reply is the last: a regenerate answers its message again
            await _last_reply_is(state, reply if streamed else None, sent=True)
        raise
    except Exception as exc:
        await _hide(thinking)
        await send_error(exc)
        return
    finally:
        metrics.REPLYING.dec()
        state.ended()
    reply.metadata = conversation.record(message_id, text, reply.content)  # for the history
    lost = state.was_lost(request_id)  # stopped by a dropped socket
    # Sent to a socket that is gone: shown on its return. Asked before and after sending,
    # as the socket may come back (or go) while the final form is on its way.
    state.delivered(reply)
    budget = options.reply_budget(settings)
    sizes = (budget, engine.context_tokens, state.waited_s)
    left = None if spend is None or end is None else await spend(end.stats.spent_tokens)
    await _finish(state, reply, thinking, end, sizes, lost=lost, quota_left=left)
    state.delivered(reply)


async def _finish(
    state: ChatState,
    reply: cl.Message,
    thinking: cl.Message,
    end: ReplyEnd | None,
    sizes: tuple[int, int, float],
    *,
    lost: bool,
    quota_left: tuple[int, int] | None = None,
) -> None:
    """The reply's last form: a note when the model wrote no text, then the footer
    (``sizes``: the reply's budget and the model's context, in tokens, and the time its
    message waited in line; ``quota_left``: the day's tokens left, and the day's, when
    few are)."""
    if not reply.streaming:
        await _hide(thinking)
        if end is not None and end.finish_reason != "abort":
            # The model wrote only tokens without text (special ones): say so.
            await reply.stream_token(t("no_text"))
    strings = chat_strings()
    budget, context, waited_s = sizes
    notes = footer_notes(
        end, strings, reply_budget=budget, lost=lost, context=context, waited_s=waited_s
    )
    if quota_left is not None:
        notes.append(strings("quota_left", left=quota_left[0], limit=quota_left[1]))
    reply.content = final_reply(reply.content, notes)
    reply.metadata = {**(reply.metadata or {}), NOTES_KEY: notes}  # for an export
    await _last_reply_is(state, reply, sent=False)
    await reply.send()  # with its buttons


async def _last_reply_is(state: ChatState, reply: cl.Message | None, *, sent: bool) -> None:
    """``reply`` is the one a regenerate answers again (None: none is), with the buttons;
    the one before loses them. ``sent``: it is on the page already (a stopped reply)."""
    before = state.replace_last_reply(reply)
    if before is not None and before is not reply:
        for action in before.actions:
            await action.remove()
        before.actions = []
    if reply is None:
        return
    buttons = [(REGENERATE, "refresh-cw"), (EXPORT, "download")]
    if SHARE in action_names() and getattr(cl.context.session.user, "identifier", None):
        buttons.append((SHARE, "link"))
    reply.actions = [
        cl.Action(name=name, payload={}, label=t(name), tooltip=t(f"{name}_tooltip"), icon=icon)
        for name, icon in buttons
    ]
    for action in reply.actions if sent else ():
        await action.send(for_id=reply.id)


async def remove_reply(reply: cl.Message) -> None:
    """A reply gone from the chat and the history, with its run (its feedback's holder)."""
    await reply.remove()
    if reply.parent_id:
        await cl.Step(name="reply", type="run", id=reply.parent_id).remove()


async def _show(notice: cl.Message) -> None:
    """A passing notice on screen only: not stored, not in the chat's context."""
    await send_step(notice.to_dict())


async def show_notice(text: str) -> None:
    """``text`` on screen as a passing notice of the app's (``_show``)."""
    await _show(cl.Message(content=text))


async def _hide(notice: cl.Message) -> None:
    await delete_step(notice.to_dict())
