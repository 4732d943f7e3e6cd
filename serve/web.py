"""Chainlit's web app under uvicorn with uvloop: what ``chainlit run app.py`` does, less
two costs on every await of every chat. ``chainlit run`` applies nest_asyncio (which
swaps asyncio's C tasks and futures for pure-Python ones) and keeps asyncio's own loop;
this module does neither. Chainlit's app is loaded the same way, so the handlers, the
routes and the settings are the ones ``chainlit run`` gets.

Usage::

    serve_app("127.0.0.1", 8000)    # blocks until SIGINT or SIGTERM
"""

from __future__ import annotations

import os
from pathlib import Path

import uvicorn

from deploy import console
from deploy.settings import Settings

__all__ = ["APP", "serve_app"]

APP = Path(__file__).resolve().parent.parent / "app.py"
# The websocket's per-message deflate costs CPU on every streamed frame; chat frames are
# small. Chainlit's own variable turns it back on (behind a slow link, say).
DEFLATE = "UVICORN_WS_PER_MESSAGE_DEFLATE"


def _load_chainlit_app() -> object:
    """Chainlit's ASGI app with ``app.py`` loaded into it (as ``chainlit run`` does)."""
    from chainlit.auth import ensure_jwt_secret
    from chainlit.config import config, load_module
    from chainlit.server import app

    config.run.headless = True  # no browser opened on the server
    config.run.module_name = str(APP)
    load_module(config.run.module_name)
    ensure_jwt_secret()  # type: ignore[no-untyped-call]
    return app


def configure_logging(settings: Settings) -> Path:
    """This process's console and log file (``deploy.console``); the file's path."""
    return console.configure(settings.log_level, settings.log_format, settings.log_file)


def serve_app(host: str, port: int) -> None:
    """Serve the chat app on ``host:port`` until SIGINT or SIGTERM."""
    os.chdir(APP.parent)  # Chainlit reads .chainlit/ and chainlit.md from here
    app = _load_chainlit_app()
    deflate = os.environ.get(DEFLATE, "false").lower() in {"1", "true", "yes"}
    uvicorn.run(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        loop="uvloop",
        ws_per_message_deflate=deflate,
        log_level="error",  # Chainlit's own choice: the app logs what matters
        timeout_graceful_shutdown=5,
    )
