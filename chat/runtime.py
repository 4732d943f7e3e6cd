"""The web app's one set-up: settings -> engine, sign-in, history, routes.

Usage (``app.py``)::

    configure(resume=handlers.resume_chat)   # a bad setting: one line on stderr, exit 2
    runtime().engine     # from the handlers, afterwards

Chainlit decides at import which sign-in and data layer an app has, so this runs when
``app.py`` is imported; every module of this package can be imported (and tested)
without it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import chainlit as cl
from chainlit.config import config
from chainlit.types import ThreadDict

from deploy.settings import AUTH_SECRET, Settings, SettingsError
from engine import ChatEngine, joined

from . import arrival, history, routes
from .access import admission, guards, origins, sessions, sign_in
from .access.hosts import AllowedHosts
from .access.limits import UserLimits
from .access.peers import ProxyTrust
from .access.sessions import ChatCount, OpenChats
from .access.shared_limits import LIMITS_FILE, SharedChatCount, SharedUserLimits
from .compat import drop_blocking_sleep, guard_module_getattr, private_files_folder
from .conversation import Seal

__all__ = ["Runtime", "configure", "runtime"]


@dataclass
class Runtime:
    """What the handlers work with: the process's engine, its per-user limits, and the
    seal on the exchanges the app records (set again once the history is open)."""

    engine: ChatEngine
    limits: UserLimits | SharedUserLimits
    history_url: str | None  # where signed-in users' chats are kept; None: nowhere
    seal: Seal
    trust: ProxyTrust  # the proxy whose forwarded addresses count


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


def _limits(settings: Settings) -> tuple[UserLimits | SharedUserLimits, OpenChats]:
    """This process's limits, or, in a group of workers, the group's (one file they share)."""
    values = {
        "max_replies": settings.user_max_replies,
        "per_minute": settings.user_messages_per_minute,
        "max_total": settings.max_replies or 2 * settings.max_num_seqs,
    }
    group = joined()
    if group is None:
        return UserLimits(**values), ChatCount()
    shared, worker = group.folder / LIMITS_FILE, group.worker
    return SharedUserLimits(shared, worker=worker, **values), SharedChatCount(shared, worker=worker)


_current: Runtime | None = None


def runtime() -> Runtime:
    """The configured runtime; ``RuntimeError`` before ``configure()``."""
    if _current is None:
        raise RuntimeError("the web app is not configured: import app.py (chainlit run app.py)")
    return _current


def configure(
    *,
    resume: Callable[[ThreadDict], Awaitable[None]],
    reconnected: Callable[[], Awaitable[None]],
) -> Runtime:
    """Build the engine from the settings and register sign-in, history and routes;
    idempotent (``chainlit run -w`` imports app.py again: the engine stays one)."""
    global _current
    os.umask(0o077)  # the history, the logs, the caches: the app's user's alone
    # ``chainlit run``'s uvicorn would take X-Forwarded-For from any local client as the
    # visitor's address; who a visitor is, is chat.access.peers' to say (serve.web turns
    # the rewrite off itself).
    os.environ["FORWARDED_ALLOW_IPS"] = ""
    # Before the engine starts: Chainlit's lazy __getattr__ breaks PyTorch's compiler.
    guard_module_getattr(cl)
    # Chainlit sleeps 1 ms, blocking, in every Message and Step it builds (see compat).
    drop_blocking_sleep("chainlit.message", "chainlit.step")
    private_files_folder()  # not beside the code: the code's folder is read-only
    try:
        engine = ChatEngine.shared()
    except SettingsError as exc:  # one line naming the setting, then stop
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    settings = engine.settings
    if _current is None or _current.engine is not engine:
        limits, chats = _limits(settings)
        signed_in = sign_in.register(settings)
        # Without sign-in no one owns a chat, so none is kept.
        url = settings.history_url if signed_in else None
        if url is not None:
            history.register(url, resume)
        _current = Runtime(engine, limits, url, _seal(), proxy_trust(settings))
        if not signed_in:  # signed-in users are accountable; anonymous addresses capped
            sessions.register(_current.trust, settings.max_chats_per_address, chats)
    trust = _current.trust
    arrival.register(on_reconnect=reconnected)
    admission.register(admission.Admission(engine.check_message, _current.limits, trust))
    origins.register(settings.origin_list)
    hosts = AllowedHosts.of(str(config.run.host), settings.allowed_host_list)
    guards.register(trust, hosts, settings.max_message_chars, settings.socket_timeout_s)
    token = settings.ops_token.get_secret_value().encode() if settings.ops_token else None
    routes.register(engine, token, trust)
    return _current
