"""The front door every Socket.IO event passes before anything of Chainlit's runs.

Chainlit takes what a socket sends as the page would send it. A client that is not the
page chose a session id that Chainlit then used as a folder to write into and delete
(its files folder joined with ``sessionId``: an absolute id, or ``../..``, named any folder the app
may delete), stored any settings it was sent, re-read and re-sent a whole resumed chat
at every ``connection_successful``, and stored a "Task manually stopped." message at
every ``stop``. Here, first of all, at every event:

* ``connect``: the handshake must be a page's: a session id and a thread id that are
  canonical UUIDs, a known client type, small JSON for the rest; and one address may open
  ``ERNIE_NEW_CHATS_PER_MINUTE`` sockets a minute (reconnects included);
* every other event: one visitor (``chat.access.admission.visitor``) may send
  ``ERNIE_REQUESTS_PER_MINUTE`` events a minute (a third of it at once): past it the
  socket is closed; an event of a socket with no session, of a feature that is off, or
  larger than any the page sends (``EVENT_BYTES``, a message's text apart) goes nowhere;
* ``connection_successful`` runs once per socket; ``stop`` only while a reply runs;
  ``chat_settings_change`` only with values the settings panel can send (checked before
  Chainlit stores them; a refusal is answered in words);
* ``disconnect`` always runs: it gives back what the session held.

The chains themselves are wired in ``chat.chainlit_door.wire``.

Usage::

    door = FrontDoor(trust, settings, store, check_settings=lambda values: ...)
    chainlit_door.wire(door.guard, steps)
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from settings.settings import Settings

from .. import metrics
from ..chainlit_door import Handler, Step, WebsocketSession, app_handles, config, session_task
from ..counts import Store
from ..errors import PanelValueError
from .admission import refuse, visitor
from .peers import ProxyTrust
from .rates import LogThrottle, Rate

__all__ = ["EVENT_BYTES", "FrontDoor", "canonical_uuid"]

logger = logging.getLogger(__name__)

EVENT_BYTES = 16 << 10  # the page's largest event but a message: the settings, a few KiB
CLIENT_TYPES = frozenset({"webapp", "copilot"})  # the page and Chainlit's own widget
AUTH_TEXT_CHARS = 4096  # userEnv (JSON) and chatProfile: short texts from the page
WARNINGS_PER_MINUTE = 6  # per visitor and kind: a flood is said, not written 1,000 times


def canonical_uuid(value: Any) -> bool:
    """``value`` is a UUID in its canonical lower-case text form (no path, no braces)."""
    try:
        return isinstance(value, str) and str(uuid.UUID(value)) == value
    except ValueError:
        return False


def _auth_problem(auth: Any) -> str | None:
    """Why a socket's handshake is not a page's (None: it is)."""
    if not isinstance(auth, dict):
        return "no handshake"
    if not canonical_uuid(auth.get("sessionId")):
        return "the session id is not a UUID"
    if auth.get("threadId") and not canonical_uuid(auth.get("threadId")):
        return "the thread id is not a UUID"
    if auth.get("clientType") not in CLIENT_TYPES:
        return "an unknown client type"
    profile, user_env = auth.get("chatProfile"), auth.get("userEnv")
    for text in (profile, user_env):
        if text is not None and (not isinstance(text, str) or len(text) > AUTH_TEXT_CHARS):
            return "a handshake field that is not short text"
    try:
        if user_env and not isinstance(json.loads(user_env), dict):
            return "user environment that is not a JSON object"
    except ValueError:
        return "user environment that is not JSON"
    return None


def _size(event: str, data: tuple[Any, ...]) -> int:
    """The event's size as JSON, a message's text apart (the frame and the admission
    bound that: ``chat.access.guards``, ``chat.access.admission``)."""
    if event in ("client_message", "edit_message") and data and isinstance(data[0], dict):
        message = data[0].get("message")
        if isinstance(message, dict):
            data = ({**data[0], "message": {**message, "output": ""}}, *data[1:])
    return len(json.dumps(data, default=str, ensure_ascii=False))


@dataclass(frozen=True)
class Features:
    """The Chainlit features whose events the app serves."""

    audio: bool
    favorites: bool
    window_messages: bool
    settings_edits: bool

    @classmethod
    def of_chainlit(cls) -> Features:
        audio = config.features.audio
        return cls(
            audio=bool(audio and audio.enabled),
            favorites=bool(config.features.favorites),
            window_messages=app_handles("on_window_message"),
            settings_edits=app_handles("on_settings_edit"),
        )

    def off(self) -> set[str]:
        """The events of the features that are off: they go nowhere."""
        off = set()
        if not self.audio:
            off |= {"audio_start", "audio_chunk", "audio_end"}
        if not self.favorites:
            off |= {"message_favorite", "fetch_favorites"}
        if not self.window_messages:
            off.add("window_message")
        if not self.settings_edits:
            off.add("chat_settings_edit")
        return off


class FrontDoor:
    """The rules above, for every event (``guard``)."""

    def __init__(
        self,
        trust: ProxyTrust,
        settings: Settings,
        store: Store,
        *,
        check_settings: Callable[[Any], object],
        close: Callable[[str], Awaitable[None]],
        features: Features | None = None,
    ) -> None:
        self.trust = trust
        self._check_settings = check_settings
        self._close = close
        self._events = Rate(store, "events", per_minute=settings.requests_per_minute)
        self._chats = Rate(store, "new_chats", per_minute=settings.new_chats_per_minute)
        self._warnings = LogThrottle(per_minute=WARNINGS_PER_MINUTE)
        self._off = (features or Features.of_chainlit()).off()
        self._settled: set[str] = set()  # sockets whose connection_successful ran

    def rules(self) -> dict[str, Step]:
        """The door's rules of single events, as steps of the app's one registry of
        per-event rules (``chat.runtime``)."""
        return {
            "connection_successful": self._checked("connection_successful", self._first_success),
            "stop": self._checked("stop", self._replying),
            "chat_settings_change": self._checked("chat_settings_change", self._panel_values),
        }

    @staticmethod
    def _checked(event: str, check: Callable[..., Awaitable[bool]]) -> Step:
        """A step that drops the event where ``check`` says no."""

        def step(handler: Handler) -> Handler:
            async def checked(sid: str, *data: Any) -> Any:
                session = WebsocketSession.get(sid)
                if session is None or not await check(sid, session, *data):
                    metrics.REFUSED.labels(door="socket", reason=event).inc()
                    return None
                return await handler(sid, *data)

            return checked

        return step

    def guard(self, event: str, handler: Handler) -> Handler:
        """``handler`` behind the door's rules for every event."""
        if event == "connect":
            return self._connecting(handler)
        if event == "disconnect":
            return self._disconnecting(handler)

        async def guarded(sid: str, *data: Any) -> Any:
            session = WebsocketSession.get(sid)
            if session is None:  # Chainlit's handler would raise
                metrics.REFUSED.labels(door="socket", reason="no_session").inc()
                return None
            who = visitor(session, self.trust)
            if not await self._events.allow(who):
                limit = self._events.per_minute
                self._refused("rate", who, "closed a socket of %s: over %d a minute", who, limit)
                await self._close(sid)
                return None
            if event in self._off:  # a feature that is off: its events go nowhere
                metrics.REFUSED.labels(door="socket", reason="feature_off").inc()
                return None
            if _size(event, data) > EVENT_BYTES:
                self._refused("size", who, "dropped a %s larger than the page sends", event)
                return None
            return await handler(sid, *data)

        return guarded

    def _refused(self, reason: str, who: str, text: str, *args: Any) -> None:
        """Counted (``/metrics``), and said in the log at most a few times a minute for
        one visitor and reason: a flood is said, not written a thousand times."""
        metrics.REFUSED.labels(door="socket", reason=reason).inc()
        if self._warnings.allow(f"{reason}\0{who}"):
            logger.warning(text, *args)

    def _connecting(self, connect: Handler) -> Handler:
        async def connecting(sid: str, environ: dict[str, Any], auth: Any = None) -> Any:
            problem = _auth_problem(auth)
            address = self.trust.address_of_environ(environ)
            if problem is not None:
                self._refused("handshake", address, "chat refused from %s: %s", address, problem)
                raise ConnectionRefusedError(problem)
            if not await self._chats.allow(f"address:{address}"):
                self._refused(
                    "new_chats", address, "chat refused: %s opens chats too often", address
                )
                raise ConnectionRefusedError("too many new chats from this address: wait a minute")
            return await connect(sid, environ, auth)

        return connecting

    def _disconnecting(self, disconnect: Handler) -> Handler:
        async def disconnecting(sid: str, *reason: Any) -> Any:
            self._settled.discard(sid)
            return await disconnect(sid)  # Chainlit's takes no reason

        return disconnecting

    async def _first_success(self, sid: str, session: WebsocketSession) -> bool:
        """A socket says it connected once (each time re-read and re-sent a resumed chat)."""
        if sid in self._settled:
            return False
        self._settled.add(sid)
        return True

    async def _replying(self, sid: str, session: WebsocketSession) -> bool:
        """A stop with nothing to stop stores a notice and stops nothing."""
        task = session_task(session)
        return task is not None and not task.done()

    async def _panel_values(self, sid: str, session: WebsocketSession, values: Any = None) -> bool:
        """The panel's own values, checked before Chainlit stores them in the session."""
        try:
            self._check_settings(values)
        except PanelValueError as exc:
            await refuse(session, exc)
            return False
        return True
