"""Messages are admitted before Chainlit keeps them.

Chainlit's ``client_message`` handler stores a message (and names a new chat after it) and
keeps it in the session's context before the app's ``on_message`` runs; its
``edit_message`` stores the new text first too. A message the app then refused had
already cost disk and memory: five 3 MiB messages grew the history by 22 MB. Here both
events pass a front door first: the payload must be a chat message, its text is checked
(``engine.check_message``: empty, too long) and cleaned, and the visitor's limits are
counted (``chat.access.turns``: it gets a ticket, running or waiting in line, handed over
to its reply by the message's id). A refusal is answered in words and goes nowhere else:
not to the history, not into the chat's context, not as the chat's name. An admitted
message's ticket is given back when its handling ends, however it ends.

Usage (``chat.chainlit_door.wire`` wires the steps)::

    admission = Admission(engine.check_message, limits, trust)
    {"client_message": [admission.message], "edit_message": [admission.edit]}
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from chainlit.message import ErrorMessage

from engine import MessageRefusedError

from .. import metrics
from ..chainlit_door import Handler, WebsocketSession, chat_messages, enter, say, session_task
from ..errors import LimitExceededError, MalformedMessageError
from ..words import chat_strings, error_text
from .peers import ProxyTrust
from .turns import ReplyLine, Ticket

__all__ = ["Admission", "refuse", "visitor"]

logger = logging.getLogger(__name__)


def visitor(session: WebsocketSession, trust: ProxyTrust) -> str:
    """Whom the per-user limits count: the signed-in user, else the client's address (a
    new tab is no new allowance; a trusted proxy's forwarded address counts)."""
    if session.user is not None:
        return f"user:{session.user.identifier}"
    return f"address:{trust.address_of_environ(session.environ or {})}"


def _edited(session: WebsocketSession, payload: Any) -> None:
    """An edit must name a message the user sent in this chat (Chainlit would hand the
    handler no message at all, or the assistant's)."""
    wanted = payload["message"]["id"]
    kept = chat_messages(session.id)
    if not any(m.id == wanted and m.type == "user_message" for m in kept):
        raise MalformedMessageError("no message of the user's to edit")


def _text_of(payload: Any) -> str:
    """The message's text, once the payload proved to be a chat message: the user's (a
    client chose ``assistant_message`` and an exchange of its own making), with an id
    that is a new UUID."""
    message = payload.get("message") if isinstance(payload, dict) else None
    if not isinstance(message, dict) or not isinstance(message.get("output"), str):
        raise MalformedMessageError("no message text")
    if message.get("type") != "user_message":
        raise MalformedMessageError("not a message of the user's")
    named = message.get("id")
    try:  # a version 4 UUID in its canonical text (the history's ids are compared as text)
        parsed = uuid.UUID(str(named))
        valid_id = parsed.version == 4 and str(parsed) == named
    except ValueError:
        valid_id = False
    if not valid_id:
        raise MalformedMessageError("the message id is not a UUID")
    return str(message["output"])


@dataclass(frozen=True)
class Admission:
    check: Callable[[str], str]  # the engine's message check: cleaned text, or refused
    limits: ReplyLine
    trust: ProxyTrust
    # Whether a step of this id is stored (the history's; None: no history): a new
    # message may not take a stored id (Chainlit's edit then deleted what it named).
    stored: Callable[[str], Awaitable[bool]] | None = None

    async def _check_new(self, session: WebsocketSession, payload: Any) -> None:
        """A new message's id is no message's yet, in this chat or the history."""
        wanted = payload["message"]["id"]
        taken = any(m.id == wanted for m in chat_messages(session.id))
        if taken or (self.stored is not None and await self.stored(wanted)):
            raise MalformedMessageError("the message id is taken")

    async def admit(self, session: WebsocketSession, payload: Any, *, edit: bool = False) -> Ticket:
        """Check and clean the message in ``payload``; count it. Its ticket, handed over to
        its reply."""
        text = _text_of(payload)
        if edit:
            _edited(session, payload)
        else:
            await self._check_new(session, payload)
        who = visitor(session, self.trust)
        ticket = await self.limits.admit(who)  # counted, refused below or not
        try:
            payload["message"]["output"] = self.check(text)
        except MessageRefusedError:
            await self.limits.done(ticket)  # no reply will run
            raise
        self.limits.hand_over(payload["message"]["id"], ticket)
        return ticket

    def message(self, handler: Handler) -> Handler:
        """``client_message`` behind the door: checked, cleaned and counted first."""
        return _admitting(self, handler, edit=False)

    def edit(self, handler: Handler) -> Handler:
        """``edit_message`` behind the door: an edit of one of the user's own messages."""
        return _admitting(self, handler, edit=True)


async def refuse(session: WebsocketSession, exc: Exception) -> None:
    """The refusal in the chat's language, shown and kept nowhere else (not stored)."""
    enter(session)  # the chat's language
    metrics.ERRORS.labels(kind=type(exc).__name__).inc()
    words = error_text(exc, chat_strings())
    assert words is not None, exc  # every refusal above has its words
    await say(session, dict(ErrorMessage(content=words).to_dict()))


def _admitting(admission: Admission, handler: Handler, *, edit: bool) -> Handler:
    """``handler`` behind the front door. A new message is handed to a task of its own
    (the session's current task), whose end gives the place back; an edit is answered
    within the handler."""

    async def admitted(sid: str, payload: Any) -> Any:
        metrics.MESSAGES.inc()
        session = WebsocketSession.require(sid)
        try:
            ticket = await admission.admit(session, payload, edit=edit)
        except (MalformedMessageError, MessageRefusedError, LimitExceededError) as exc:
            logger.debug("message refused (%s): %s", type(exc).__name__, exc)
            await refuse(session, exc)
            return None
        if edit:
            try:
                return await handler(sid, payload)
            finally:
                await admission.limits.done(ticket)
        try:
            result = await handler(sid, payload)
        except BaseException:
            await admission.limits.done(ticket)
            raise
        task = session_task(session)
        if task is not None:
            task.add_done_callback(lambda _: admission.limits.release(ticket))
        else:
            await admission.limits.done(ticket)
        return result

    return admitted
