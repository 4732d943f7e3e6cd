"""The chat history's data layer: Chainlit's SQLAlchemy layer with every id checked.

A client chooses some of the ids Chainlit stores: the websocket's ``auth.threadId``
becomes a thread's id, a message's id becomes a step's. Chainlit's layer pastes the
user's thread ids into the text of one query (``get_all_user_threads``), so a thread id
such as ``x') UNION SELECT ...`` read other users' chats. Here every thread, step,
element, feedback and user id is refused unless it is a UUID in its canonical
lower-case form, at every entry point (SQLite compares text: an upper-case copy of another
user's thread id was a thread of its own there), and that query is built with bound
parameters (``chat.history.thread_query``); the SQLite schema checks the shape of ids too
(``chat.history``), and PostgreSQL's columns are UUIDs. A chat's name (Chainlit takes its
first message) is cut to ``THREAD_NAME_CHARS``.

Every read and write of a chat checks its owner against who asks (``requester``: the user
of the chat whose socket the task serves, else the signed-in user of the HTTP request):
another user's chat reads as none (``get_thread``, for a resume and an export), and a
write into it (``update_thread``, ``create_step``, ``delete_step``, feedback) is refused
with ``HistoryAccessError``; a socket whose write was refused is closed (an honest page
writes only into its own chat: the thread id is the server's, ``chat.history.claims``).
A step may be written only where it already belongs.

A read of a chat sees the writes of it already under way (``chat.history.writes``). A
SQLite file's writes wait their turn for up to ``SQLITE_WAIT_S``, for a connection and for
SQLite's lock, with readers out of the way (WAL): with SQLite's 5 s and the pool's 30 s,
a slow event loop made writes wait past them, and Chainlit's ``execute_sql`` dropped each
such write with a warning ("database is locked": 18 of 40 new chats, the loop held 0.3 s
at a time).

Usage::

    layer = SafeDataLayer(conninfo=url)       # what @cl.data_layer returns
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any, NoReturn

from chainlit.data.sql_alchemy import SQLAlchemyDataLayer
from chainlit.types import Feedback, Pagination, ThreadDict, ThreadFilter
from sqlalchemy.ext.asyncio import create_async_engine

from .. import metrics
from ..access.peers import REQUEST_USER
from ..chainlit_door import close_socket, context_session, use_engine
from .search import listed_threads
from .thread_query import user_threads
from .writes import PendingWrites

__all__ = [
    "THREAD_NAME_CHARS",
    "HistoryAccessError",
    "HistoryIdError",
    "SafeDataLayer",
    "checked_id",
    "requester",
]

logger = logging.getLogger(__name__)

THREAD_NAME_CHARS = 200  # the sidebar shows a line of it
FEEDBACK_CHARS = 2000  # a feedback's comment (the page's dialog sends a few lines)
SQLITE_WAIT_S = 60.0  # a SQLite write waits this long for its turn


class HistoryIdError(ConnectionRefusedError, ValueError):
    """An id that is not a UUID reached the history (a client chose it).

    Also a ``ConnectionRefusedError``: python-socketio refuses a websocket whose
    connect handler raises one, so a websocket naming such a thread is refused.
    """


class HistoryAccessError(PermissionError):
    """A user asked to change what belongs to another user's chat."""


def checked_id(value: Any, what: str) -> str:
    """``value`` if it is a UUID in its canonical lower-case text form; else
    ``HistoryIdError``."""
    try:
        canonical = str(uuid.UUID(str(value)))
    except ValueError:
        canonical = None
    if not isinstance(value, str) or canonical != value:
        logger.warning("history: refused a %s id that is not a UUID: %.80r", what, value)
        raise HistoryIdError(f"{what} id is not a UUID")
    return value


def _optional(value: Any, what: str) -> str | None:
    return None if value is None else checked_id(value, what)


class SafeDataLayer(SQLAlchemyDataLayer):
    """Chainlit's SQLAlchemy data layer that takes UUIDs only, and binds every value."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Chainlit writes and deletes steps in tasks it does not wait for: a delete right
        # after a write (a regenerated reply) overtook the write, and the step came back.
        # Each step's writes and delete take their turns in the order they began.
        self._turns: dict[str, tuple[asyncio.Lock, int]] = {}
        self._writes = PendingWrites()
        url = self.engine.url
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            waits = {"connect_args": {"timeout": SQLITE_WAIT_S}, "pool_timeout": SQLITE_WAIT_S}
            use_engine(self, create_async_engine(url, **waits))

    async def get_all_user_threads(
        self, user_id: str | None = None, thread_id: str | None = None
    ) -> list[ThreadDict] | None:
        return await user_threads(self, _optional(user_id, "user"), _optional(thread_id, "thread"))

    async def list_threads(self, pagination: Pagination, filters: ThreadFilter) -> Any:
        """A page of the user's chats, and its search (``chat.history.search``)."""
        return await listed_threads(self, pagination, filters)

    async def get_thread_author(self, thread_id: str) -> str:
        """The chat's user; "" for no such chat (Chainlit's raised: a 500 and a traceback
        for a page that asked for its new chat before its first write was stored)."""
        return await self.author_of(thread_id) or ""

    async def get_thread(self, thread_id: str) -> ThreadDict | None:
        """The chat, if it is the requester's (another user's reads as none)."""
        await self._writes.settled(checked_id(thread_id, "thread"))
        thread = await super().get_thread(thread_id)
        if thread is not None and thread.get("userIdentifier") != requester():
            logger.warning("history: refused a read of another user's chat")
            return None
        return thread

    async def author_of(self, thread_id: str) -> str | None:
        """The identifier of the chat's user (None: no such chat yet, or no user)."""
        await self._writes.settled(checked_id(thread_id, "thread"))
        return (await self._owners(thread_id))[1]

    async def update_thread(self, thread_id: str, *args: Any, **kwargs: Any) -> None:
        async with self._writes.writing(checked_id(thread_id, "thread")):
            await self._update_thread(thread_id, *args, **kwargs)

    async def _update_thread(self, thread_id: str, *args: Any, **kwargs: Any) -> None:
        new_owner = _optional(kwargs.get("user_id"), "user")
        owner, author = await self._owners(thread_id)
        if author is not None and author != requester():
            if not args and set(kwargs) == {"metadata"}:  # a closed socket's session
                logger.warning("history: refused a session's settings for another's chat")
                return  # persisted at its disconnect: nothing written, nothing to close
            await _refuse("this chat is another user's")
        if new_owner is not None and owner not in (None, new_owner):
            await _refuse("this chat is another user's")  # no chat changes hands
        if isinstance(kwargs.get("name"), str):
            kwargs["name"] = kwargs["name"][:THREAD_NAME_CHARS]
        await super().update_thread(thread_id, *args, **kwargs)

    async def delete_thread(self, thread_id: str) -> None:
        await super().delete_thread(checked_id(thread_id, "thread"))

    @contextlib.asynccontextmanager
    async def _turn_of(self, step: str) -> AsyncIterator[None]:
        lock, users = self._turns.get(step, (asyncio.Lock(), 0))
        self._turns[step] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._turns[step]
            if users == 1:
                del self._turns[step]
            else:
                self._turns[step] = (lock, users - 1)

    async def create_step(self, step_dict: Any) -> None:
        thread = checked_id(step_dict.get("threadId"), "thread")
        async with (
            self._writes.writing(thread),
            self._turn_of(checked_id(step_dict.get("id"), "step")),
        ):
            await self._create_step(step_dict)

    async def _create_step(self, step_dict: Any) -> None:
        thread = step_dict["threadId"]
        _optional(step_dict.get("parentId"), "step")
        # A message's id is the client's choice: it may not take over another chat's step.
        if await self._thread_of("steps", step_dict["id"]) not in (None, thread):
            await _refuse("this step belongs to another chat")
        await super().create_step(step_dict)  # its update_thread checks the chat's owner

    async def step_stored(self, step_id: str) -> bool:
        """Whether a step of this id is stored (in any chat)."""
        return await self._thread_of("steps", checked_id(step_id, "step")) is not None

    async def _owners(self, thread_id: str) -> tuple[str | None, str | None]:
        """The chat's user's id and identifier (None, None: no such chat yet)."""
        query = 'SELECT "userId", "userIdentifier" FROM threads WHERE "id" = :id'
        rows = await self.execute_sql(query=query, parameters={"id": thread_id})
        if not isinstance(rows, list) or not rows:
            return None, None
        owner, author = rows[0]["userId"], rows[0]["userIdentifier"]
        return (None if owner is None else str(owner)), (None if author is None else str(author))

    async def delete_step(self, step_id: str) -> None:
        chat = getattr(_context_session(), "thread_id", None)  # the chat it is deleted from
        async with self._writes.writing(chat), self._turn_of(checked_id(step_id, "step")):
            await self._require_owner(await self._thread_of("steps", step_id), unowned_ok=True)
            await super().delete_step(step_id)

    async def get_step(self, step_id: str) -> Any:
        return await super().get_step(checked_id(step_id, "step"))

    async def upsert_feedback(self, feedback: Feedback) -> str:
        if feedback.id is not None:  # an existing one: its chat must be the user's
            await self._require_owner(await self._thread_of("feedbacks", feedback.id))
        thread = await self._thread_of("steps", checked_id(feedback.forId, "step"))
        await self._require_owner(thread)
        if feedback.value not in (0, 1) or len(feedback.comment or "") > FEEDBACK_CHARS:
            raise HistoryIdError(f"feedback is 0 or 1, with at most {FEEDBACK_CHARS} characters")
        feedback.threadId = thread  # the step's own chat, not the one the client names
        stored = await super().upsert_feedback(feedback)
        metrics.FEEDBACK.labels(value="up" if feedback.value == 1 else "down").inc()
        return stored

    async def delete_feedback(self, feedback_id: str) -> bool:
        checked_id(feedback_id, "feedback")
        await self._require_owner(await self._thread_of("feedbacks", feedback_id))
        return await super().delete_feedback(feedback_id)

    async def _thread_of(self, table: str, row_id: str) -> str | None:
        """The chat a step or a feedback belongs to (None: there is no such row)."""
        query = f'SELECT "threadId" FROM {table} WHERE "id" = :id'
        rows = await self.execute_sql(query=query, parameters={"id": checked_id(row_id, table)})
        return str(rows[0]["threadId"]) if isinstance(rows, list) and rows else None

    async def _require_owner(self, thread_id: str | None, *, unowned_ok: bool = False) -> None:
        """The requester owns ``thread_id`` (Chainlit checks no owner before it changes
        feedback or deletes a step); ``unowned_ok``: a step of no chat, or of a chat that
        has no user yet (its first write, under way), is no one's to guard."""
        author = (await self._owners(thread_id))[1] if thread_id else None
        if author is None and unowned_ok:
            return
        if author is None or author != requester():
            await _refuse("this chat is not the user's")

    async def get_element(self, thread_id: str, element_id: str) -> Any:
        checked_id(thread_id, "thread")
        return await super().get_element(thread_id, checked_id(element_id, "element"))

    async def create_element(self, element: Any) -> None:
        checked_id(element.id, "element")
        _optional(element.thread_id, "thread")
        _optional(element.for_id, "step")
        await super().create_element(element)

    async def delete_element(self, element_id: str, thread_id: str | None = None) -> None:
        checked_id(element_id, "element")
        await super().delete_element(element_id, _optional(thread_id, "thread"))


def requester() -> str | None:
    """Who asks: the user of the chat whose socket this task serves (Chainlit's context),
    else the signed-in user of this HTTP request (None: no one)."""
    identifier = getattr(getattr(_context_session(), "user", None), "identifier", None)
    return identifier if isinstance(identifier, str) else REQUEST_USER.get()


def _context_session() -> Any:
    """The chat session this task serves (Chainlit's context), if any."""
    return context_session()


async def _refuse(reason: str) -> NoReturn:
    """``HistoryAccessError``; a chat's socket that asked is closed (its page wrote into
    a chat that is not its user's: no honest page does)."""
    logger.warning("history: refused: %s", reason)
    socket = getattr(_context_session(), "socket_id", None)
    if isinstance(socket, str):
        with contextlib.suppress(Exception):  # closing already
            await close_socket(socket)
    raise HistoryAccessError(reason)
