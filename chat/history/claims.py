"""A chat's thread belongs to its user from its first byte.

A page's handshake names the thread it resumes (``auth.threadId``: a reload, a chat
opened from the sidebar), and Chainlit made that id the session's thread whatever it
was: it refuses another user's existing chat, but a thread no chat has yet became the
session's. A user who named a fresh id in a socket of their own and sent another user a
link to ``/thread/<id>`` then shared that user's chat: read it through their own export,
and wrote their own reply into it. Here, right after Chainlit's ``connect``, a new
session keeps the thread it names only if that is a stored chat of its own user;
otherwise its thread is a fresh one of the server's (the page is still told "Thread not
found" for the id it named, and chats on in the new thread).

Usage (``chat.chainlit_door.wire`` wires the step, innermost)::

    {"connect": [..., claim_thread]}
"""

from __future__ import annotations

import logging
from typing import Any

from ..chainlit_door import Handler, data_layer, new_thread, session_of

__all__ = ["claim_thread"]

logger = logging.getLogger(__name__)


def claim_thread(connect: Handler) -> Handler:
    """``connect``, then the new session's thread: the one it names if it is the user's
    stored chat, else a fresh one."""

    async def claimed(sid: str, environ: dict[str, Any], auth: Any = None) -> Any:
        result = await connect(sid, environ, auth)
        session = session_of(sid)
        named = auth.get("threadId") if isinstance(auth, dict) else None
        if session is None or session.restored or not named or session.thread_id != named:
            return result  # a socket back to its session keeps the thread it has
        user = getattr(session.user, "identifier", None)
        layer = data_layer()
        author = await layer.author_of(named) if layer is not None and user else None
        if author is None or author != user:
            logger.info("a socket named a thread that is not its user's chat: a new one")
            new_thread(session)
        return result

    return claimed
