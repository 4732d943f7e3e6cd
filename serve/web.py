"""Chainlit's web app under uvicorn with uvloop: what ``chainlit run app.py`` does, less
two costs on every await of every chat. ``chainlit run`` applies nest_asyncio (which
swaps asyncio's C tasks and futures for pure-Python ones) and keeps asyncio's own loop;
this module does neither. Chainlit's app is loaded the same way, so the handlers, the
routes and the settings are the ones ``chainlit run`` gets.

uvicorn's proxy-headers rewrite is off: it would take ``X-Forwarded-For`` from any local
client as the visitor's address, and who a visitor is, is ``chat.access.peers``' to say. Its
websocket reads frames no larger than the longest message needs (``chat.access.guards``).

Usage::

    serve_app(settings, ("127.0.0.1", 8000))    # blocks until SIGINT or SIGTERM
    serve_app(settings, ("127.0.0.1", 8101), public_host="0.0.0.0")   # a group's worker
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

import uvicorn

from deploy import console
from deploy.settings import Settings

__all__ = ["APP", "raise_open_files", "serve_app"]

APP = Path(__file__).resolve().parent.parent / "app.py"
# The websocket's per-message deflate costs CPU on every streamed frame; chat frames are
# small. Chainlit's own variable turns it back on (behind a slow link, say).
DEFLATE = "UVICORN_WS_PER_MESSAGE_DEFLATE"


def _load_chainlit_app(public_host: str) -> object:
    """Chainlit's ASGI app with ``app.py`` loaded into it (as ``chainlit run`` does);
    ``public_host``: the address browsers reach it by (the allowed hosts follow it)."""
    from chainlit.auth import ensure_jwt_secret
    from chainlit.config import config, load_module
    from chainlit.server import app

    config.run.headless = True  # no browser opened on the server
    config.run.host = public_host
    config.run.module_name = str(APP)
    load_module(config.run.module_name)
    ensure_jwt_secret()  # type: ignore[no-untyped-call]
    return app


def raise_open_files() -> int:
    """This process's open-file limit raised to its hard limit: every open chat is a
    socket (two through HAProxy), and HAProxy and the workers inherit it; the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return max(soft, target)


def configure_logging(settings: Settings) -> Path:
    """This process's console and log file (``deploy.console``); the file's path."""
    return console.configure(settings.log_level, settings.log_format, settings.log_file)


def serve_app(settings: Settings, bind: tuple[str, int], *, public_host: str | None = None) -> None:
    """Serve the chat app on ``bind`` until SIGINT or SIGTERM."""
    from chat.access.guards import frame_bytes

    host, port = bind
    os.chdir(APP.parent)  # Chainlit reads .chainlit/ and chainlit.md from here
    app = _load_chainlit_app(public_host or host)
    deflate = os.environ.get(DEFLATE, "false").lower() in {"1", "true", "yes"}
    uvicorn.run(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        loop="uvloop",
        proxy_headers=False,
        ws_max_size=frame_bytes(settings.max_message_chars),
        ws_per_message_deflate=deflate,
        log_level="error",  # Chainlit's own choice: the app logs what matters
        timeout_graceful_shutdown=5,
    )
