"""The web app's one set-up: settings -> engine, sign-in, history, routes.

Usage (``chat.open_app``, from ``app.py`` or a group's worker)::

    configure(Comebacks(resume=..., resumed=..., reconnected=...), seat=seat, plan=plan)
    runtime().engine     # from the handlers, afterwards

The runtime lives on Chainlit's ASGI app (``app.state.runtime``, as vLLM's OpenAI server
keeps its ``engine_client``): one per web app, found again when ``chainlit run -w``
imports app.py anew. A group's worker gets its engine core through ``seat``, handed down
by the launcher (``serve.worker.run_worker`` -> ``serve.web.serve_app`` -> here).
Chainlit decides at import which sign-in and data layer an app has, so this runs when
the app loads; every module of this package can be imported (and tested) without it.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import chainlit as cl
from chainlit.config import config
from chainlit.server import app
from chainlit.types import ThreadDict

from engine import Attachment, ChatClient, ChatEngine, Plan
from settings.loader import load_settings
from settings.settings import AUTH_SECRET, Settings, SettingsError

from . import chainlit_door, export, routes
from .access import guards, origins, sign_in
from .access.admission import Admission
from .access.front_door import FrontDoor
from .access.hosts import AllowedHosts
from .access.peers import ProxyTrust
from .access.sessions import ChatCount, ChatsPerAddress, OpenChats
from .access.shared_limits import LIMITS_FILE, SharedChatCount
from .access.turns import Turns
from .arrival import Arrival
from .chainlit_door import Step, drop_blocking_sleep, guard_module_getattr, private_files_folder
from .conversation import Seal
from .export import Exports
from .history.claims import claim_thread
from .history.setup import register as register_history
from .history.setup import step_stored
from .ui.live import LiveReplies
from .ui.panel import options_from

__all__ = ["Comebacks", "Runtime", "configure", "runtime"]


@dataclass
class Runtime:
    """What the handlers work with: the process's engine, its per-user limits, and the
    seal on the exchanges the app records (set again once the history is open)."""

    engine: ChatClient
    limits: Turns  # the visitors' limits, the replies at once and their line
    history_url: str | None  # where signed-in users' chats are kept; None: nowhere
    seal: Seal
    trust: ProxyTrust  # the proxy whose forwarded addresses count
    door: FrontDoor  # every socket event's first step (chat.access.front_door)
    steps: dict[str, list[Step]]  # the app's steps of each event, outermost first
    exports: Exports  # the export links' tokens
    live: LiveReplies = field(default_factory=LiveReplies)  # replies a reload may follow


def proxy_trust(settings: Settings) -> ProxyTrust:
    """The proxy whose forwarded addresses count: the one that sends the shared secret."""
    if settings.auth_proxy_secret is None:
        return ProxyTrust.none()
    header = settings.auth_proxy_secret_header.lower().encode()
    return ProxyTrust(header, settings.auth_proxy_secret.get_secret_value().encode())


def _seal() -> Seal:
    """Exchanges are signed with a key from Chainlit's session secret (the history needs
    sign-in, which needs that secret); without one nothing is resumed, any key does."""
    secret = os.environ.get(AUTH_SECRET, "").encode() or os.urandom(32)
    return Seal(hmac.new(secret, b"ernie-chat exchange", hashlib.sha256).digest())


def _limits(engine: ChatClient, group: Attachment | None) -> tuple[Turns, OpenChats]:
    """This process's limits and line, or, in a group of workers, the group's (one file
    they share), each engine core's slots and line its share of the settings'."""
    settings, cores = engine.settings, 1 if group is None else group.plan.engines
    slots = settings.max_replies or 2 * engine.chats_at_once
    line = slots if settings.max_waiting is None else settings.max_waiting
    values = {
        "max_replies": settings.user_max_replies,
        "per_minute": settings.user_messages_per_minute,
        "slots": math.ceil(slots / cores),
        "line": math.ceil(line / cores),
    }
    if group is None:
        return Turns(":memory:", worker=0, core=0, **values), ChatCount()
    shared, worker = group.folder / LIMITS_FILE, group.worker
    core = worker // group.plan.workers
    return Turns(shared, worker=worker, core=core, **values), SharedChatCount(shared, worker=worker)


def _configured() -> Runtime | None:
    runtime: Runtime | None = getattr(app.state, "runtime", None)
    return runtime


def runtime() -> Runtime:
    """The configured runtime; ``RuntimeError`` before ``configure()``."""
    current = _configured()
    if current is None:
        raise RuntimeError("the web app is not configured: import app.py (chainlit run app.py)")
    return current


def _engine(seat: Attachment | None, plan: Plan | None) -> ChatClient:
    """A group's worker: its seat's engine; ``python -m serve``: the launcher's plan (it
    ran the checks once); else one from the settings, checked here (a bad setting: one
    line on stderr, exit 2)."""
    if seat is not None:
        return ChatEngine(seat.plan, seat)
    if plan is not None:
        return ChatEngine(plan.alone())
    try:
        return ChatEngine.from_settings(load_settings())
    except SettingsError as exc:  # one line naming the setting, then stop
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


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
    *,
    seat: Attachment | None = None,
    plan: Plan | None = None,
    engine: ChatClient | None = None,
) -> Runtime:
    """Build the engine (or take ``engine``: the tests' fake) and register sign-in,
    history and routes; idempotent (``chainlit run -w`` imports app.py again: the engine
    stays one)."""
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
    current = _configured()
    if current is None:
        built = engine or _engine(seat, plan)
        current = app.state.runtime = _build(built, seat, comebacks)
    engine, settings, trust = current.engine, current.engine.settings, current.trust
    chainlit_door.wire(current.door.guard, current.steps)
    # A closed tab's session waits this long for its socket to come back (Chainlit: 1 h).
    config.project.session_timeout = max(1, round(settings.session_keep_minutes * 60))
    origins.register(settings.origin_list)
    hosts = AllowedHosts.of(str(config.run.host), settings.allowed_host_list)
    guards.register(trust, hosts, settings)
    token = settings.ops_token.get_secret_value().encode() if settings.ops_token else None
    routes.register(engine, token, trust)
    export.register(lambda: runtime().exports, lambda: runtime().seal)
    return current


def _build(engine: ChatClient, seat: Attachment | None, comebacks: Comebacks) -> Runtime:
    """The runtime around a new engine: its limits, sign-in and history registered, and
    the steps of the socket events (wired by ``configure``)."""
    settings = engine.settings
    limits, chats = _limits(engine, seat)
    signed_in = sign_in.register(settings, None if seat is None else seat.folder / LIMITS_FILE)
    url = settings.kept_history_url
    if url is not None:
        register_history(url, comebacks.resume)
    trust = proxy_trust(settings)
    door = FrontDoor(
        trust,
        settings,
        check_settings=lambda values: options_from(values, engine),
        close=chainlit_door.close_socket,
    )
    arrival, exports = Arrival(comebacks.reconnected, comebacks.resumed), Exports()
    stored = None if url is None else step_stored
    admission = Admission(engine.check_message, limits, trust, stored)
    steps: dict[str, list[Step]] = {
        "connect": [claim_thread],  # the thread is the server's or the user's own chat
        "connection_successful": [arrival.connected],
        "client_message": [admission.message, arrival.message],
        "edit_message": [admission.edit],
        "disconnect": [arrival.disconnected, exports.forgetting],
    }
    if not signed_in:  # signed-in users are accountable; anonymous addresses capped
        counted = ChatsPerAddress(trust, settings.max_chats_per_address, chats)
        steps["connect"].insert(0, counted.connect)
        steps["disconnect"].append(counted.disconnect)
    return Runtime(engine, limits, url, _seal(), trust, door, steps, exports)
