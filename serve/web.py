"""Chainlit's web app under uvicorn with uvloop: what ``chainlit run app.py`` does, less
two costs on every await of every chat. ``chainlit run`` applies nest_asyncio (which
swaps asyncio's C tasks and futures for pure-Python ones) and keeps asyncio's own loop;
this module does neither. The app is opened the way ``app.py`` opens it
(``open_web_app``: the launcher builds the engine and hands it to ``chat.open_app``, as
vLLM's server builds its engine client), so the handlers, the routes and the settings are
the ones ``chainlit run`` gets; a group's worker builds its engine on its attachment on the
engine core.

uvicorn's proxy-headers rewrite is off: it would take ``X-Forwarded-For`` from any local
client as the visitor's address, and who a visitor is, is ``chat.access.peers``' to say. Its
websocket reads frames no larger than the longest message needs (``chat.access.guards``),
and its connections pass ``serve.connections`` (idle ones closed, one address capped).

Usage::

    serve_app(plan, ("127.0.0.1", 8000))    # blocks until SIGINT or SIGTERM
    serve_app(plan, ("127.0.0.1", 8101), public_host="0.0.0.0", attachment=attachment)  # a worker
    open_web_app()                          # app.py (chainlit run): the settings checked here
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn

from serve import console
from settings.settings import Settings

if TYPE_CHECKING:
    from chat.runtime import Runtime
    from engine import Attachment, Plan

__all__ = ["APP", "open_web_app", "raise_open_files", "serve_app"]

APP = Path(__file__).resolve().parent.parent / "app.py"
# The websocket's per-message deflate costs CPU on every streamed frame; chat frames are
# small. Chainlit's own variable turns it back on (behind a slow link, say).
DEFLATE = "UVICORN_WS_PER_MESSAGE_DEFLATE"


def _load_chainlit_app(public_host: str, plan: Plan, attachment: Attachment | None) -> object:
    """Chainlit's ASGI app with the chat app opened in it (as ``app.py`` does) on the
    launcher's plan (made once: not checked again here); ``public_host``: the address
    browsers reach it by (the allowed hosts follow it)."""
    from chat.chainlit_door import config, ensure_jwt_secret, server_app

    config.run.headless = True  # no browser opened on the server
    config.run.host = public_host
    config.run.module_name = str(APP)
    open_web_app(plan, attachment)
    ensure_jwt_secret()  # type: ignore[no-untyped-call]
    return server_app


def _checked_plan() -> Plan:
    """The settings checked against the model and the machine (``chainlit run app.py``: no
    launcher ran the checks); a bad setting: one line on stderr, exit 2."""
    from chat.access.oidc import check_oidc
    from engine import preflight
    from settings.loader import load_settings
    from settings.settings import SettingsError

    try:
        settings = load_settings()
        check_oidc(settings)
        return preflight(settings)
    except SettingsError as exc:  # one line naming the setting, then stop
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def open_web_app(plan: Plan | None = None, attachment: Attachment | None = None) -> Runtime:
    """The chat app opened on an engine built here from the launcher's ``plan`` (None:
    ``chainlit run app.py``, the settings checked here): in this process (one core), or a
    group's worker's on its ``attachment`` on the group's core. ``chainlit run -w`` imports
    app.py again: the first runtime and its engine stay, nothing is checked or built anew."""
    from chat import open_app
    from chat.runtime import GroupWorker, configured
    from engine import ChatEngine

    current = configured()
    if current is not None:
        return open_app(current.engine, current.settings, current.replies, current.worker)
    plan = plan or _checked_plan()
    if attachment is None:
        alone = plan.alone()
        return open_app(ChatEngine(alone), alone.settings, alone.replies)
    core = attachment.worker // attachment.plan.workers
    worker = GroupWorker(attachment.folder, attachment.worker, core)
    return open_app(
        ChatEngine(attachment.plan, attachment),
        attachment.plan.settings,
        attachment.plan.replies,
        worker,
    )


def raise_open_files() -> int:
    """This process's open-file limit raised to its hard limit: every open chat is a
    socket (two through HAProxy), and HAProxy and the workers inherit it; the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return max(soft, target)


def configure_logging(settings: Settings) -> Path:
    """This process's console and log file (``serve.console``); the file's path."""
    return console.configure(settings.log_level, settings.log_format, settings.log_file)


def serve_app(
    plan: Plan,
    bind: tuple[str, int],
    *,
    public_host: str | None = None,
    attachment: Attachment | None = None,
) -> None:
    """Serve the chat app on ``bind`` until SIGINT or SIGTERM; ``attachment``: a group's worker's
    place on its engine core (None: the engine runs in this process)."""
    from chat.access.guards import frame_bytes

    from .connections import gate_of, gated_protocol, keep_alive_s

    settings = plan.settings
    host, port = bind
    os.chdir(APP.parent)  # Chainlit reads .chainlit/ and chainlit.md from here
    app = _load_chainlit_app(public_host or host, plan, attachment)
    deflate = os.environ.get(DEFLATE, "false").lower() in {"1", "true", "yes"}
    uvicorn.run(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        loop="uvloop",
        # Idle and slow connections closed, one address capped (a group's: by HAProxy).
        http=gated_protocol(gate_of(settings, counts_addresses=attachment is None)),
        timeout_keep_alive=keep_alive_s(settings),
        proxy_headers=False,
        ws_max_size=frame_bytes(settings.max_message_chars),
        ws_per_message_deflate=deflate,
        log_level="error",  # Chainlit's own choice: the app logs what matters
        timeout_graceful_shutdown=5,
    )
