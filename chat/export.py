"""A chat exported as Markdown or JSON: its messages, who wrote each, when, and the notes
under each reply.

The button under the last reply (``chat.handlers.export``) gives the tab a link of its own,
``/export/<token>/chat.md`` and ``chat.json``: the token names the chat's session, is
known only to that tab, lives while the tab's socket does (a closed tab's link is 404),
and with sign-in on the link answers only the session's own user. The messages come from
the history when the chat is kept there (every message; the data layer reads only the
user's own chat), from the session otherwise (the newest messages Chainlit keeps of it:
``CONTEXT_KEPT``); either way only the exchanges the app signed (a client chooses its
messages' type and metadata: a made-up exchange is no reply of the model's).

Usage::

    token = exports.token_for(session_id)             # the link's token
    exports.forget(session_id)                         # the tab's socket closed
    entries = chat_entries(steps, seal)                # steps as the history or Chainlit has them
    markdown(entries, title), as_json(entries)         # the files
"""

from __future__ import annotations

import json
import secrets
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Depends
from fastapi.responses import JSONResponse, Response

from .chainlit_door import (
    Handler,
    add_routes_first,
    chat_messages,
    data_layer,
    get_current_user,
    session_by_id,
    session_of,
)
from .conversation import NOTES_KEY, ExchangeSigner, signed_exchange, step_metadata
from .words import DEFAULT_LANGUAGE, strings_for

__all__ = [
    "FORMATS",
    "Entry",
    "Exports",
    "as_json",
    "chat_entries",
    "entries_of",
    "markdown",
    "register",
]

FORMATS = {"chat.md": "text/markdown; charset=utf-8", "chat.json": "application/json"}
EXPORT_PATH = "/export/{token}/{name}"
# The request's signed-in user, as Chainlit checks it (None where no one signs in).
RequestUser = Annotated[Any, Depends(get_current_user)]
TOKENS_KEPT = 10_000  # sessions with a link at once, per process (the oldest go first)


@dataclass(frozen=True)
class Entry:
    """One message of an export."""

    role: str  # "user" or "assistant"
    text: str
    time: str | None  # ISO 8601, UTC, as Chainlit stamped it
    notes: list[str] = field(default_factory=list)
    feedback: dict[str, Any] | None = None  # a reply's 👍 (1) or 👎 (0), and its comment


def chat_entries(steps: Iterable[Mapping[str, Any]], seal: ExchangeSigner) -> list[Entry]:
    """The exchanges among ``steps`` (the history's or Chainlit's, oldest first) that the
    app signed: each user message that got a reply, and the reply as the model wrote it,
    with its notes. Passing notices (loading, refusals) are no exchange and are left out."""
    asked: dict[str, str | None] = {}
    entries: list[Entry] = []
    steps = list(steps)
    runs = {str(step.get("id")): step for step in steps if step.get("type") == "run"}
    for step in steps:
        if step.get("type") == "user_message":
            asked[str(step.get("id"))] = step.get("createdAt")
            continue
        exchange = signed_exchange(step, seal)
        if step.get("type") != "assistant_message" or exchange is None:
            continue
        notes = [str(note) for note in step_metadata(step).get(NOTES_KEY) or []]
        when = asked.get(str(exchange.get("message_id")), step.get("createdAt"))
        entries.append(Entry("user", str(exchange.get("user_text", "")), when))
        reply = str(exchange.get("reply_text", ""))
        run = runs.get(str(step.get("parentId")), step)  # a reply's feedback is its run's
        entries.append(Entry("assistant", reply, step.get("createdAt"), notes, _feedback(run)))
    return entries


def _feedback(step: Mapping[str, Any]) -> dict[str, Any] | None:
    """A reply's feedback as the history keeps it (``{"value", "comment"}``), if any."""
    given = step.get("feedback")
    if not isinstance(given, Mapping) or given.get("value") is None:
        return None
    return {"value": int(given["value"]), "comment": given.get("comment") or ""}


def _shown_time(value: str | None) -> str:
    return "" if not value else value.replace("T", " ")[:16] + " UTC"


def markdown(entries: list[Entry], *, title: str, names: Mapping[str, str]) -> str:
    """The chat as Markdown: a heading per message with its author and time."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [f"# {title}", f"*{now}*"]
    for entry in entries:
        parts.append(f"### {names[entry.role]} · {_shown_time(entry.time)}".rstrip(" ·"))
        parts.append(entry.text)
        parts.extend(f"*{note}*" for note in entry.notes)
        if entry.feedback is not None:
            thumb = "👍" if entry.feedback["value"] == 1 else "👎"
            parts.append(f"{thumb} {entry.feedback['comment']}".rstrip())
    return "\n\n".join(parts) + "\n"


def as_json(entries: list[Entry], *, title: str) -> str:
    """The chat as JSON: ``{"title", "exported_at", "messages": [{role, text, time,
    notes, feedback}]}``."""
    exported = datetime.now(UTC).isoformat(timespec="seconds")
    body = {"title": title, "exported_at": exported, "messages": [asdict(e) for e in entries]}
    return json.dumps(body, ensure_ascii=False, indent=2) + "\n"


class Exports:
    """The export links' tokens of one process: token -> the chat's session id."""

    def __init__(self, kept: int = TOKENS_KEPT) -> None:
        self._sessions: OrderedDict[str, str] = OrderedDict()
        self._tokens: dict[str, str] = {}
        self._kept = kept

    def token_for(self, session_id: str) -> str:
        """The session's token (the same one each time)."""
        token = self._tokens.get(session_id)
        if token is None:
            token = self._tokens[session_id] = secrets.token_urlsafe(18)
            self._sessions[token] = session_id
            while len(self._sessions) > self._kept:
                _, gone = self._sessions.popitem(last=False)
                self._tokens.pop(gone, None)
        return token

    def session_of(self, token: str) -> str | None:
        return self._sessions.get(token)

    def forget(self, session_id: str) -> None:
        """The session's link answers no more (its tab closed)."""
        token = self._tokens.pop(session_id, None)
        if token is not None:
            del self._sessions[token]

    def forgetting(self, disconnect: Handler) -> Handler:
        """The ``disconnect`` step: a closed tab's link is gone with its socket."""

        async def forgotten(sid: str) -> Any:
            session = session_of(sid)
            if session is not None:
                self.forget(session.id)
            return await disconnect(sid)

        return forgotten


def _steps_of(session: Any) -> Iterable[Mapping[str, Any]]:
    return [message.to_dict() for message in chat_messages(session.id)]


async def entries_of(session: Any, seal: ExchangeSigner) -> list[Entry]:
    """The chat's exchanges: from the history when it is kept there (the user's own chat:
    the data layer reads no other), else the session's."""
    layer = data_layer()
    if layer is not None and session.user is not None:
        thread = await layer.get_thread(session.thread_id)
        if thread is not None:
            return chat_entries(thread.get("steps") or [], seal)
    return chat_entries(_steps_of(session), seal)


def _refusal(session: Any, user: Any) -> JSONResponse | None:
    """Why this request may not read the session's chat (None: it may)."""
    if session is None:
        return JSONResponse({"detail": "no such chat here"}, status_code=404)
    owner = getattr(session.user, "identifier", None)
    if owner is not None and getattr(user, "identifier", None) != owner:
        return JSONResponse({"detail": "this chat is not yours"}, status_code=403)
    return None


def register(exports: Callable[[], Exports], seal: Callable[[], ExchangeSigner]) -> None:
    """``GET /export/<token>/chat.md`` and ``chat.json``, ahead of Chainlit's page route;
    idempotent (``exports``: the app's tokens, and ``seal``: its signature on exchanges,
    asked at each request: the route outlives a reloaded app). With sign-in on,
    Chainlit's own check of the request's user runs first."""

    async def export_chat(token: str, name: str, user: RequestUser) -> Response:
        session_id = exports().session_of(token)
        session = session_by_id(session_id) if session_id and name in FORMATS else None
        refused = _refusal(session, user)
        if refused is not None:
            return refused
        t = strings_for(getattr(session, "language", None) or DEFAULT_LANGUAGE)
        entries = await entries_of(session, seal())
        title = t("export_title")
        names = {"user": t("export_you"), "assistant": t("export_model")}
        if name == "chat.json":
            body = as_json(entries, title=title)
        else:
            body = markdown(entries, title=title, names=names)
        file = f"ernie-chat-{datetime.now(UTC):%Y%m%d-%H%M}.{name.split('.')[1]}"
        headers = {"Content-Disposition": f'attachment; filename="{file}"'}
        headers["Cache-Control"] = "no-store"
        return Response(body, media_type=FORMATS[name], headers=headers)

    add_routes_first({EXPORT_PATH: export_chat})
