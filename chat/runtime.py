"""The web app's one set-up: settings -> engine, sign-in, history, routes.

Usage (``chat.open_app``, from the launcher: ``serve.web.open_web_app``)::

    configure(Comebacks(resume=..., resumed=..., reconnected=...), engine, settings, replies)
    runtime().engine     # from the handlers, afterwards

The runtime lives on Chainlit's ASGI app (``app.state.runtime``, as vLLM's OpenAI server
keeps its ``engine_client``): one per web app, found again when ``chainlit run -w``
imports app.py anew. The launcher builds the engine (a group's worker on its attachment on the
engine core: ``serve.worker.run_worker`` -> ``serve.web.serve_app``) and sizes the cap and
the line (``engine.Plan.replies``); the web app takes them as they are.
Chainlit decides at import which sign-in and data layer an app has, so this runs when
the app loads; every module of this package can be imported (and tested) without it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import chainlit as cl
from chainlit.types import ThreadDict

from engine import ChatClient, ReplySlots
from settings.settings import AUTH_SECRET, Settings

from . import chainlit_door, export, routes, sharing
from .access import guards, origins, sign_in
from .access.admission import Admission
from .access.front_door import FrontDoor
from .access.hosts import AllowedHosts
from .access.peers import ProxyTrust
from .access.quota import DailyTokens
from .access.sessions import ChatCount, ChatsPerAddress
from .access.turns import ReplyLine
from .arrival import Arrival
from .chainlit_door import (
    Step,
    config,
    drop_blocking_sleep,
    guard_module_getattr,
    private_files_folder,
    server_app,
)
from .conversation import ExchangeSigner
from .counts import LIMITS_FILE, Store, open_store, owner_of
from .export import Exports
from .history.claims import claim_thread
from .history.setup import register as register_history
from .history.setup import step_stored
from .ui.live import LiveReplies
from .ui.panel import options_from

__all__ = ["Comebacks", "GroupWorker", "Runtime", "configure", "configured", "runtime"]


@dataclass(frozen=True)
class GroupWorker:
    """A group's worker: the folder where the group's workers keep what they share (their
    counts, the line), its number among them, and its engine core's."""

    folder: Path
    worker: int
    core: int


@dataclass
class Runtime:
    """What the handlers work with: the process's engine, its per-user limits, and the
    seal on the exchanges the app records (set again once the history is open)."""

    engine: ChatClient
    settings: Settings  # the web app's (sign-in, limits, history, the reply's budget)
    worker: GroupWorker | None  # a group's worker; None: the app alone in its process
    replies: ReplySlots  # its engine core's cap on replies and line, as the launcher sized them
    store: Store  # every count: this process's, its group's file, or the replicas' database
    limits: ReplyLine  # the visitors' limits, the replies at once and their line
    history_url: str | None  # where signed-in users' chats are kept; None: nowhere
    seal: ExchangeSigner
    trust: ProxyTrust  # the proxy whose forwarded addresses count
    door: FrontDoor  # every socket event's first step (chat.access.front_door)
    steps: dict[str, list[Step]]  # the app's steps of each event, outermost first
    exports: Exports  # the export links' tokens
    live: LiveReplies = field(default_factory=LiveReplies)  # replies a reload may follow
    background: list[asyncio.Task[None]] = field(default_factory=list)  # the store's lease, ...


def proxy_trust(settings: Settings) -> ProxyTrust:
    """The proxy whose forwarded addresses count: the one that sends the shared secret."""
    if settings.auth_proxy_secret is None:
        return ProxyTrust.none()
    header = settings.auth_proxy_secret_header.lower().encode()
    return ProxyTrust(header, settings.auth_proxy_secret.get_secret_value().encode())


def _seal() -> ExchangeSigner:
    """Exchanges are signed with a key from Chainlit's session secret (the history needs
    sign-in, which needs that secret); without one nothing is resumed, any key does."""
    secret = os.environ.get(AUTH_SECRET, "").encode() or os.urandom(32)
    return ExchangeSigner(hmac.new(secret, b"ernie-chat exchange", hashlib.sha256).digest())


def counts_store(settings: Settings, worker: GroupWorker | None) -> Store:
    """Where every count lives: the replicas' database (``ERNIE_COUNTS_URL``), else the
    group's file, else this process's memory."""
    where = settings.counts_url or (":memory:" if worker is None else worker.folder / LIMITS_FILE)
    folder, number = (None, None) if worker is None else (worker.folder, worker.worker)
    return open_store(where, owner=owner_of(folder, number))


def _limits(store: Store, settings: Settings, replies: ReplySlots, core: int) -> ReplyLine:
    """The visitors' limits and the line of this process's engine core; ``replies``: its cap
    and line, as the launcher sized them."""
    per_day = settings.daily_tokens
    return ReplyLine(
        store,
        core=core,
        max_replies=settings.user_max_replies,
        per_minute=settings.user_messages_per_minute,
        slots=replies.slots,
        line=replies.line,
        quota=DailyTokens(store, per_day=per_day) if per_day else None,
    )


def configured() -> Runtime | None:
    """The runtime configured in this process, or None (``chainlit run -w`` imports app.py
    again over the first one)."""
    runtime: Runtime | None = getattr(server_app.state, "runtime", None)
    return runtime


def runtime() -> Runtime:
    """The configured runtime; ``RuntimeError`` before ``configure()``."""
    current = configured()
    if current is None:
        raise RuntimeError("the web app is not configured: import app.py (chainlit run app.py)")
    return current


@dataclass(frozen=True)
class Comebacks:
    """The handlers of a chat that comes back: resumed from the history (``resume`` with
    its thread, then ``resumed`` once the page has it), or its socket back to its session
    (``reconnected``)."""

    resume: Callable[[ThreadDict], Awaitable[None]]
    resumed: Callable[[], Awaitable[None]]
    reconnected: Callable[[], Awaitable[None]]


def configure(
    comebacks: Comebacks,
    engine: ChatClient,
    settings: Settings,
    replies: ReplySlots,
    worker: GroupWorker | None = None,
) -> Runtime:
    """The runtime around the launcher's engine, with sign-in, history and routes
    registered; idempotent (``chainlit run -w`` imports app.py again: the first runtime
    and its engine stay, the new engine is never started)."""
    os.umask(0o077)  # the history, the logs, the caches: the app's user's alone
    # ``chainlit run``'s uvicorn would take X-Forwarded-For from any local client as the
    # visitor's address; who a visitor is, is chat.access.peers' to say (serve.web turns
    # the rewrite off itself).
    os.environ["FORWARDED_ALLOW_IPS"] = ""
    # Before the engine starts: Chainlit's lazy __getattr__ breaks PyTorch's compiler.
    guard_module_getattr(cl)
    # Chainlit sleeps 1 ms, blocking, in every Message and Step it builds (chainlit_door.patches).
    drop_blocking_sleep("chainlit.message", "chainlit.step")
    private_files_folder()  # not beside the code: the code's folder is read-only
    current = configured()
    if current is None:
        current = server_app.state.runtime = _build(engine, settings, (replies, worker), comebacks)
    engine, settings, trust = current.engine, current.settings, current.trust
    chainlit_door.wire(current.door.guard, current.steps)
    # A closed tab's session waits this long for its socket to come back (Chainlit: 1 h).
    config.project.session_timeout = max(1, round(settings.session_keep_minutes * 60))
    origins.register(settings.origin_list)
    hosts = AllowedHosts.of(str(config.run.host), settings.allowed_host_list)
    guards.register(trust, hosts, settings, current.store)
    token = settings.ops_token.get_secret_value().encode() if settings.ops_token else None
    routes.register(engine, token, trust)
    export.register(lambda: runtime().exports, lambda: runtime().seal)
    sharing.register(settings, lambda: runtime().seal)
    return current


def _build(
    engine: ChatClient,
    settings: Settings,
    place: tuple[ReplySlots, GroupWorker | None],
    comebacks: Comebacks,
) -> Runtime:
    """The runtime around a new engine: its limits, sign-in and history registered, and
    the steps of the socket events (wired by ``configure``)."""
    replies, worker = place
    store = counts_store(settings, worker)
    limits = _limits(store, settings, replies, 0 if worker is None else worker.core)
    signed_in = sign_in.register(settings, store)
    url = settings.kept_history_url
    if url is not None:
        register_history(url, comebacks.resume)
    trust = proxy_trust(settings)
    door = FrontDoor(
        trust,
        settings,
        store,
        check_settings=lambda values: options_from(values, settings),
        close=chainlit_door.close_socket,
    )
    arrival, exports = Arrival(comebacks.reconnected, comebacks.resumed), Exports()
    stored = None if url is None else step_stored
    admission = Admission(engine.check_message, limits, trust, stored)
    rules = door.rules()  # every event's first rules are the door's (door.guard)
    steps: dict[str, list[Step]] = {  # the one registry of per-event rules
        "connect": [claim_thread],  # the thread is the server's or the user's own chat
        "connection_successful": [rules["connection_successful"], arrival.connected],
        "client_message": [admission.message, arrival.message],
        "edit_message": [admission.edit],
        "stop": [rules["stop"]],  # only while a reply runs
        "chat_settings_change": [rules["chat_settings_change"]],  # the panel's own values
        "disconnect": [arrival.disconnected, exports.forgetting],
    }
    if not signed_in:  # signed-in users are accountable; anonymous addresses capped
        counted = ChatsPerAddress(trust, settings.max_chats_per_address, ChatCount(store))
        steps["connect"].insert(0, counted.connect)
        steps["disconnect"].append(counted.disconnect)
    return Runtime(
        engine, settings, worker, replies, store, limits, url, _seal(), trust, door, steps, exports
    )
