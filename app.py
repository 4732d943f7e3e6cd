"""The chat UI: Chainlit handlers on the in-process engine.

Run: ``chainlit run app.py`` (settings from ``ERNIE_*`` variables or ``.env``).
Every handler reads per-chat state, calls ``engine``, and renders; the logic is in
``engine/`` and the words are in ``.chainlit/translations/*.json`` (key ``app``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import chainlit as cl
from chainlit.data.sql_alchemy import SQLAlchemyDataLayer
from chainlit.input_widget import Select, Slider
from chainlit.server import app as server
from chainlit.types import ThreadDict
from fastapi.responses import JSONResponse, Response

from engine import (
    ChatEngine,
    ChatOptions,
    EngineError,
    EngineFailedError,
    EngineRestartingError,
    EngineState,
    EngineStatus,
    GenerationError,
    LimitExceededError,
    MessageRefusedError,
    PromptTooLongError,
    ReplyEnd,
    SettingsError,
    TextChunk,
    available_system_prompts,
    drop_blocking_sleep,
    env_name,
    guard_module_getattr,
    metrics,
    new_request_id,
)
from engine.conversation import Conversation
from engine.history import create_schema, redact
from engine.limits import UserLimits
from engine.markdown import fix_cjk_emphasis
from engine.users import verify_password

# Before the engine starts: Chainlit's lazy __getattr__ breaks PyTorch's compiler.
guard_module_getattr(cl)
# Chainlit sleeps 1 ms, blocking, in every Message and Step it builds (see engine.compat).
drop_blocking_sleep("chainlit.message", "chainlit.step")

logger = logging.getLogger("app")

try:
    ENGINE = ChatEngine.shared()
except SettingsError as exc:  # one line naming the setting, then stop
    print(f"error: {exc}", file=sys.stderr)
    raise SystemExit(2) from None

LIMITS = UserLimits(
    max_replies=ENGINE.settings.user_max_replies,
    per_minute=ENGINE.settings.user_messages_per_minute,
)
LOADING_REFRESH_S = 1.0
EXIT_GRACE_S = 5.0
TRANSLATIONS = Path(__file__).resolve().parent / ".chainlit" / "translations"
DEFAULT_LANGUAGE = "en-US"
NO_SYSTEM_PROMPT = "none"  # the settings panel's value for "no system prompt"


@functools.cache
def app_strings(language: str) -> dict[str, Any]:
    """The app's own strings (key ``app`` of the translation files beside this module),
    for ``language`` or its base language (``zh`` -> ``zh-CN``), else English."""
    base = language.split("-")[0]
    candidates = [TRANSLATIONS / f"{language}.json", *sorted(TRANSLATIONS.glob(f"{base}-*.json"))]
    for path in [*candidates, TRANSLATIONS / f"{DEFAULT_LANGUAGE}.json"]:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        strings = data.get("app")  # Chainlit's own files for other languages have none
        if strings:
            return dict(strings)
    raise FileNotFoundError(f"no 'app' strings in {TRANSLATIONS}")


def t(key: str, **values: Any) -> str:
    """This chat's text for ``key``, in the browser's language."""
    language = cl.context.session.language if cl.context.session else DEFAULT_LANGUAGE
    return str(app_strings(language)[key]).format(**values)


@server.get("/healthz")
async def healthz() -> JSONResponse:
    """200 while the process serves (even while the model loads)."""
    return JSONResponse({"status": "alive"})


@server.get("/readyz")
async def readyz() -> JSONResponse:
    """200 with the capacity report once the engine is ready; else 503, state and time."""
    status = ENGINE.status()
    body: dict[str, Any] = {"state": status.state.value, "elapsed_s": round(status.elapsed_s, 1)}
    if status.state is not EngineState.READY:
        return JSONResponse(body | {"reason": status.reason}, status_code=503)
    body.update(running_requests=ENGINE.running_requests, capacity=ENGINE.capacity.as_dict())
    return JSONResponse(body)


@server.get("/metrics")
async def prometheus_metrics() -> Response:
    """vLLM's engine metrics and the app's, in Prometheus' text format."""
    return Response(metrics.exposition(), media_type=metrics.CONTENT_TYPE)


def serve_before_chainlit_pages(*paths: str) -> None:
    """Chainlit's catch-all route for its pages shadows routes added later: move ours first."""
    routes = server.router.routes
    for path in paths:
        route = next(r for r in routes if getattr(r, "path", None) == path)
        routes.remove(route)
        routes.insert(0, route)


serve_before_chainlit_pages("/healthz", "/readyz", "/metrics")


# Sign-in, when the settings turn it on: Chainlit then refuses pages and websockets
# without a session it signed (CHAINLIT_AUTH_SECRET).
if (USERS_FILE := ENGINE.settings.users_file) is not None:

    @cl.password_auth_callback
    async def sign_in(name: str, password: str) -> cl.User | None:
        """A user of the users file with the right password (scrypt: off the loop)."""
        if await asyncio.to_thread(verify_password, USERS_FILE, name, password):
            return cl.User(identifier=name, metadata={"provider": "password"})
        logger.warning("sign-in refused for %r", name)
        return None


if (USER_HEADER := ENGINE.settings.auth_header) is not None:

    @cl.header_auth_callback
    async def sign_in_from_proxy(headers: Any) -> cl.User | None:
        """The user a trusted proxy names in its header (the proxy must drop the
        clients' own copies of that header)."""
        name = headers.get(USER_HEADER)
        return cl.User(identifier=name, metadata={"provider": "header"}) if name else None


# Chat history: kept for signed-in users, who find their chats in the sidebar and resume
# them (also after a restart). Without sign-in no one owns a chat, so none is kept.
HISTORY_URL = ENGINE.settings.history_url if (USERS_FILE or USER_HEADER) else None
if HISTORY_URL is not None:

    @cl.data_layer
    def chat_history() -> SQLAlchemyDataLayer:
        return SQLAlchemyDataLayer(conninfo=HISTORY_URL)

    @cl.on_chat_resume
    async def resume_chat(thread: ThreadDict) -> None:
        """A chat from the history: what it recorded becomes the model's history again."""
        open_chat(Conversation.restore(step.get("metadata") for step in thread["steps"]))


async def open_history(url: str) -> None:
    """Create the history's tables where missing; a database that cannot be opened stops
    the app at start, in one line."""
    try:
        await create_schema(url)
    except Exception as exc:
        cause = next(iter(str(exc).strip().splitlines()), "")
        print(
            f"error: {env_name('history_url')}={redact(url)!r}: cannot open the chat "
            f"history ({type(exc).__name__}: {cause}); check the URL and that the "
            f"database is reachable, or set it to off",
            file=sys.stderr,
            flush=True,
        )
        os._exit(2)
    logger.info("chat history in %s", redact(url))


@cl.on_app_startup
async def start_engine() -> None:
    if HISTORY_URL is not None:
        await open_history(HISTORY_URL)
    ENGINE.start()  # in the background: the page answers while the model loads
    asyncio.get_running_loop().create_task(exit_when_the_engine_gives_up())


async def exit_when_the_engine_gives_up() -> None:
    """The engine died and every rebuild failed: ``/readyz`` says so for a moment, then
    the process exits 1 for its supervisor to start a fresh one."""
    reason = await ENGINE.wait_gave_up()
    logger.critical("exiting in %.0f s: %s", EXIT_GRACE_S, reason)
    await asyncio.sleep(EXIT_GRACE_S)
    logging.shutdown()
    os._exit(1)  # the engine's processes are already gone; nothing else needs closing


@cl.on_app_shutdown
async def stop_engine() -> None:
    await ENGINE.shutdown()


@cl.set_starters
async def starters(user: Any = None, language: str | None = None) -> list[cl.Starter]:
    strings = app_strings(language or DEFAULT_LANGUAGE)["starters"]
    return [cl.Starter(label=s["label"], message=s["message"]) for s in strings]


@cl.on_chat_start
async def start_chat() -> None:
    open_chat(Conversation())


def open_chat(conversation: Conversation) -> None:
    """A new or resumed chat: its state, and the engine's state shown."""
    metrics.CHATS_OPEN.inc()
    cl.user_session.set("conversation", conversation)
    cl.user_session.set("options", ChatOptions())
    # In the background: Chainlit locks the message box while a handler runs, and a
    # message typed while the model loads must be accepted (and answered once ready).
    cl.user_session.set("announcer", asyncio.create_task(announce_engine()))


@cl.on_settings_update
async def update_settings(values: dict[str, Any]) -> None:
    cl.user_session.set(
        "options",
        ChatOptions(
            temperature=float(values["temperature"]),
            top_p=float(values["top_p"]),
            max_tokens=int(values["max_tokens"]),
            system_prompt=""
            if values["system_prompt"] == NO_SYSTEM_PROMPT
            else values["system_prompt"],
        ),
    )


@cl.on_message
async def answer(message: cl.Message) -> None:
    metrics.MESSAGES.inc()
    conversation: Conversation = cl.user_session.get("conversation")
    conversation.rewind_to(message.id)  # an edited message answers again from there
    if message.elements:  # a text model: say so, and answer the text
        await cl.Message(content=t("files_ignored")).send()
    user = limited_user()
    try:
        text = ENGINE.check_message(message.content)
        LIMITS.admit(user, now=time.monotonic())
    except (MessageRefusedError, LimitExceededError) as exc:
        await send_error(exc)
        return
    try:
        await answer_when_ready(message.id, text, conversation)
    finally:
        LIMITS.done(user)


async def answer_when_ready(message_id: str, text: str, conversation: Conversation) -> None:
    try:
        await ENGINE.wait_ready()  # queued while the model loads
    except (EngineFailedError, EngineRestartingError) as exc:
        await send_error(exc)
        return
    announcer = cl.user_session.get("announcer")
    if announcer is not None:  # its "ready" and demo notices come before the reply
        # wait() neither re-raises the announcer's end (cancelled when a socket dropped
        # and the chat was restored) nor cancels it if this message is stopped.
        await asyncio.wait({announcer})
    await stream_reply(message_id, text, conversation, cl.user_session.get("options"))


def limited_user() -> str:
    """Whom the per-user limits count: the signed-in user, else this chat."""
    user = cl.user_session.get("user")
    return f"user:{user.identifier}" if user else f"chat:{cl.context.session.id}"


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
        await ENGINE.abort(request_id)


async def announce_engine() -> None:
    """The loading state, updated in place until ready or failed; then the chat's tools."""
    status = ENGINE.status()
    loading = status.state is EngineState.LOADING
    notice = cl.Message(content=t("loading", seconds=round(status.elapsed_s)))
    if loading:
        await notice.send()
        while status.state is EngineState.LOADING:
            with contextlib.suppress(TimeoutError, EngineError):  # wakes at once when settled
                await asyncio.wait_for(ENGINE.wait_ready(), LOADING_REFRESH_S)
            status = ENGINE.status()
            notice.content = t("loading", seconds=round(status.elapsed_s))
            await notice.update()
    notice.content = "\n\n".join(engine_notes(status, loaded_now=loading))
    if notice.content:
        await (notice.update() if loading else notice.send())
    if status.state is EngineState.READY:
        await send_settings_panel()


def engine_notes(status: EngineStatus, *, loaded_now: bool) -> list[str]:
    """What a chat is told about the engine: failure, readiness, demo weights."""
    if status.state is EngineState.RESTARTING:
        return [t("restarting")]
    if status.state is not EngineState.READY:
        return [t("failed", reason=status.reason or status.state.value)]
    notes = [t("ready", seconds=round(status.elapsed_s))] if loaded_now else []
    if ENGINE.model.is_demo:
        notes.append(t("demo_model"))
    return notes


async def send_settings_panel() -> None:
    settings, defaults = ENGINE.settings, ENGINE.model.sampling_defaults
    prompts = {t("no_system_prompt"): NO_SYSTEM_PROMPT}
    prompts.update({name: name for name in available_system_prompts()})
    if settings.system_prompt not in prompts.values():
        prompts[t("custom_system_prompt")] = settings.system_prompt
    await cl.ChatSettings(
        [
            Slider(
                id="temperature",
                label=t("temperature"),
                min=0,
                max=2,
                step=0.05,
                initial=first_set(settings.temperature, defaults.get("temperature"), 1.0),
            ),
            Slider(
                id="top_p",
                label=t("top_p"),
                min=0.05,
                max=1,
                step=0.05,
                initial=first_set(settings.top_p, defaults.get("top_p"), 1.0),
            ),
            Slider(
                id="max_tokens",
                label=t("max_tokens"),
                min=16,
                step=16,
                max=settings.max_model_len // 2,
                initial=settings.max_tokens,
            ),
            Select(
                id="system_prompt",
                label=t("system_prompt"),
                items=prompts,
                initial_value=settings.system_prompt or NO_SYSTEM_PROMPT,
            ),
        ]
    ).send()


def first_set(*values: float | None) -> float:
    """The first value that is set: 0 is a value (greedy temperature), None is not."""
    return next(v for v in values if v is not None)


async def stream_reply(
    message_id: str, text: str, conversation: Conversation, options: Any
) -> None:
    """Thinking indicator until the first text, buffered chunks, then notes and stats."""
    request_id = new_request_id()
    cl.user_session.set("request_id", request_id)
    thinking = cl.Message(content=t("thinking"))
    await thinking.send()
    reply, end = cl.Message(content=""), None
    try:
        events = ENGINE.chat(conversation.turns(), text, request_id=request_id, options=options)
        async with contextlib.aclosing(events) as stream:
            async for event in stream:
                if isinstance(event, TextChunk):
                    if not reply.streaming:
                        await thinking.remove()
                    await reply.stream_token(event.text)
                elif isinstance(event, ReplyEnd):
                    end = event
                    metrics.record_reply(end)
    except asyncio.CancelledError:  # the stop button or a closed chat: keep what was said
        if end is None:  # cancelled before the engine's abort came back (a reader asleep)
            metrics.record_cancelled_reply()
        reply.metadata = conversation.record(message_id, text, reply.content)
        with contextlib.suppress(Exception):  # the chat may be gone (a closed tab)
            await (reply.update() if reply.streaming else thinking.remove())  # and stored
        raise
    except Exception as exc:
        await thinking.remove()
        await send_error(exc)
        return
    finally:
        cl.user_session.set("request_id", None)
    if not reply.streaming:
        await thinking.remove()
    reply.metadata = conversation.record(message_id, text, reply.content)  # for the history
    if not reply.streaming and end is not None and end.finish_reason != "abort":
        # The model wrote only tokens without text (special ones): say so.
        await reply.stream_token(t("no_text"))
    reply.content = fix_cjk_emphasis(reply.content) + footer(end, options)
    await reply.send()


def footer(end: ReplyEnd | None, options: ChatOptions) -> str:
    """Notes on how the reply ended, and its stats, as a small italic line."""
    if end is None:
        return ""
    notes = []
    if end.finish_reason == "length":
        notes.append(t("cut_by_length", max_tokens=options.reply_budget(ENGINE.settings)))
    elif end.finish_reason == "abort":
        notes.append(t("stopped"))
    if end.dropped_turns:
        notes.append(t("dropped_turns", count=end.dropped_turns))
    stats = end.stats
    ttft = "-" if stats.ttft_s is None else f"{stats.ttft_s * 1000:.0f}"
    notes.append(
        t(
            "stats",
            tokens=stats.reply_tokens,
            ttft_ms=ttft,
            speed=f"{stats.tokens_per_s:.1f}",
            prompt=stats.prompt_tokens,
        )
    )
    return "\n\n" + "\n".join(f"*{note}*  " for note in notes)


async def send_error(exc: Exception) -> None:
    metrics.ERRORS.labels(kind=type(exc).__name__).inc()
    await cl.ErrorMessage(content=error_text(exc)).send()


def error_text(exc: Exception) -> str:
    """Words for the user; the detail goes to the log."""
    if isinstance(exc, LimitExceededError):
        wait = exc.retry_after_s
        if wait is None:
            return t("limit_replies", limit=exc.value)
        return t("limit_per_minute", limit=exc.value, seconds=max(1, math.ceil(wait)))
    if isinstance(exc, MessageRefusedError):
        return t(f"refused_{exc.reason}", size=exc.size, limit=exc.limit)
    if isinstance(exc, PromptTooLongError):
        return t("too_long", tokens=exc.prompt_tokens, limit=exc.limit)
    if isinstance(exc, EngineRestartingError):
        return t("restarting")
    if isinstance(exc, EngineFailedError):
        return t("failed", reason=exc.reason)
    if isinstance(exc, GenerationError):
        return t("generation_failed")
    logger.exception("unexpected error while answering")
    return t("unexpected_error")
