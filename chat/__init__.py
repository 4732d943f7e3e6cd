"""The web app: everything that knows Chainlit.

``handlers`` (the chat as the UI sees it) over three rooms: ``ui`` (a reply on screen,
the words in English and Chinese, the settings panel, errors shown), ``access`` (who a
visitor is and what they may do) and ``history`` (the data layer and resume); beside
them ``runtime`` (the one set-up), ``lifecycle``, ``routes`` (health, readiness,
metrics), ``metrics``, ``arrival`` (a socket's events in order), ``conversation``; and
``chainlit_door``, the one package that reads or writes Chainlit's, python-socketio's and
python-engineio's internals. It imports the engine's public names and never vLLM.

Usage::

    open_app()                  # app.py: the engine from the settings, checked here
    open_app(plan=plan)         # python -m serve: the launcher's plan, checked once there
    open_app(seat, plan=plan)   # a group's worker (serve.web): its seat on the shared core
    open_app(engine=MockEngine())   # tests: the web app on a fake engine (engine.mock)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine import Attachment, ChatClient, Plan

    from .runtime import Runtime

__all__ = ["open_app"]


def open_app(
    seat: Attachment | None = None,
    *,
    plan: Plan | None = None,
    engine: ChatClient | None = None,
) -> Runtime:
    """Register the handlers with Chainlit and configure the runtime (imported here, on
    use: the package's modules import without Chainlit's app being set up)."""
    from . import handlers
    from .runtime import Comebacks, configure

    comebacks = Comebacks(handlers.resume_chat, handlers.resumed, handlers.reconnected)
    return configure(comebacks, seat=seat, plan=plan, engine=engine)
