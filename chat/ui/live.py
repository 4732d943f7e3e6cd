"""Replies being written, by chat, so that a page reloaded mid-reply follows its reply.

With the history on, a page that goes away (a reload, a closed tab, a dropped socket)
does not stop its reply: the engine writes it to its end in the old session's task, which
stores it in the history then, once. A reloaded page is a new session of the same chat
(Chainlit resumes the thread from the history, where the reply is not yet): it is shown
the reply as it stands within the resumed thread, then each change of it, in place, then
its final form with its buttons (``chat.ui.streaming.follow_reply``). Nothing is
generated twice, and nothing is stored twice: the new session only shows.

Kept per process: a browser's reload comes back to its worker (the group's HAProxy pins
it with a cookie), where its reply is being written. Keyed by the chat's user and its
thread: a page follows only its own user's reply (a thread id alone was another user's
to name, and a reloaded page showed and adopted that user's reply as its own).

Usage::

    with replies.writing(user, thread_id, reply):  # the reply is written in the block
        ...
    replies.of(user, thread_id)        # a resumed chat: its reply being written, if any
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["LiveReplies", "LiveReply"]


@dataclass
class LiveReply:
    """A reply being written: its message (its text grows), and whether it ended."""

    message: Any  # the cl.Message the old session writes into
    ended: bool = False


class LiveReplies:
    def __init__(self) -> None:
        self._by_chat: dict[tuple[str, str], LiveReply] = {}

    @contextlib.contextmanager
    def writing(self, user: str, thread_id: str, message: Any) -> Iterator[LiveReply]:
        """``message`` is the reply being written in ``user``'s chat ``thread_id`` until
        the block ends (its final form set, or it stopped or failed)."""
        chat = (user, thread_id)
        live = self._by_chat[chat] = LiveReply(message)
        try:
            yield live
        finally:
            live.ended = True
            if self._by_chat.get(chat) is live:
                del self._by_chat[chat]

    def of(self, user: str, thread_id: str) -> LiveReply | None:
        """The reply being written in ``user``'s chat ``thread_id``, if any."""
        return self._by_chat.get((user, thread_id))
