"""The web app: everything that knows Chainlit.

``handlers`` (the chat as the UI sees it) over three rooms: ``ui`` (a reply on screen,
the words in English and Chinese, the settings panel, errors shown), ``access`` (who a
visitor is and what they may do) and ``history`` (the data layer and resume); beside
them ``runtime`` (the one set-up), ``lifecycle``, ``routes`` (health, readiness,
metrics), ``metrics``, ``arrival`` (a socket's events in order), ``conversation``; and
``chainlit_door``, the one package that reads or writes Chainlit's, python-socketio's and
python-engineio's internals. It imports the engine's public names and never vLLM.

Usage (the launcher builds the engine and sizes the cap, as vLLM's server builds its
engine client: ``serve.web.open_web_app`` for ``app.py`` and ``python -m serve``)::

    open_app(engine, settings, plan.replies)                  # one process
    open_app(engine, settings, plan.replies, GroupWorker(folder, worker=3, core=1))
    open_app(MockEngine(), settings, reply_slots(settings, 4))  # tests: a fake engine
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine import ChatClient, ReplySlots
    from settings.settings import Settings

    from .runtime import GroupWorker, Runtime

__all__ = ["open_app"]


def open_app(
    engine: ChatClient,
    settings: Settings,
    replies: ReplySlots,
    worker: GroupWorker | None = None,
) -> Runtime:
    """Register the handlers with Chainlit and configure the runtime around ``engine``
    (imported here, on use: the package's modules import without Chainlit's app being set
    up); ``worker``: a group's worker, which shares the group's counts."""
    from . import handlers
    from .runtime import Comebacks, configure

    comebacks = Comebacks(handlers.resume_chat, handlers.resumed, handlers.reconnected)
    return configure(comebacks, engine, settings, replies, worker)
