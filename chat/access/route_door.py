"""The front door every HTTP route passes before Chainlit reads the request.

Refused at once, before a body is read or anything stored:

* a visitor past ``ERNIE_REQUESTS_PER_MINUTE`` (a third of it at once): 429 with
  ``Retry-After`` (``/healthz`` and ``/readyz``, which load balancers poll, not counted);
* a state-changing request (``POST``, ``PUT``, ``PATCH``, ``DELETE``) that a browser sent
  from another web page (its ``Origin`` neither the app's own nor in
  ``ERNIE_ALLOWED_ORIGINS``): 403. A form posted to ``/login`` from another site signed a
  visitor into the attacker's account; JSON routes were held by CORS already;
* the routes of what the app does not do: uploads (``POST /project/file``, and its files),
  thread sharing, custom elements (``PUT``/``DELETE /project/element`` wrote a file per
  request into the session's folder), actions while none is registered, MCP while off:
  403 or 404;
* a session id the client names (``session_id`` in the query; ``sessionId`` or
  ``session_id`` in the JSON body of the routes that take one) that is not a canonical
  UUID: 400 (the id Chainlit made a folder of came from the handshake:
  ``chat.access.front_door``; no other reaches a path, and none may try);
* a body over ``MAX_BODY_BYTES`` (declared, or counted as it comes): 413; one that has
  not arrived whole ``body_timeout_s`` after its headers: 408 (a byte every 5 s held a
  connection, and its request, for ever);
* an action that is no button of the app's on a chat of this worker's: 400 or 404
  (``chat.access.actions``; Chainlit answered a 500 and a traceback).

Socket.IO's own path (matched whole: ``/ws/socket.ioX`` is any other route) passes to
Engine.IO, its events to ``chat.access.front_door``; each socket it opens, a handshake
(a request with no ``sid``) or a websocket, counts in the address's rate like a request
(24,000 opens in 52 s from three addresses grew a worker by 384 MB). Its bodies are
under the same deadline.

Usage::

    rate = Rate(store, "requests", per_minute=600)
    rules = RouteRules(trust, allowed_origins, rate, body_timeout_s=10)
    app.add_middleware(RouteDoor, rules=rules, socket_path="/ws/socket.io")
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Receive, Scope, Send

from .. import metrics
from ..chainlit_door import app_handles, config
from .actions import action_refusal
from .bodies import (
    MAX_BODY_BYTES,
    TooLarge,
    TooSlow,
    answer,
    counting,
    replayed,
    under_deadline,
    whole_body,
)
from .front_door import canonical_uuid
from .peers import ProxyTrust
from .rates import Rate

__all__ = ["MAX_BODY_BYTES", "RouteDoor", "RouteRules", "answer"]

logger = logging.getLogger(__name__)

DRAINED_BYTES = 64 << 10  # a refused request's body read before the answer, up to this
UNCOUNTED = ("/healthz", "/readyz")  # polled by load balancers and supervisors
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
UPLOAD_PATH = "/project/file"
SESSION_BODY_PATHS = ("/set-session-cookie", "/feedback", "/project/action", "/project/element")
SESSION_FIELDS = ("sessionId", "session_id")
SHARING_PATHS = ("/project/thread/share", "/project/share/")


@dataclass
class RouteRules:
    """What the door lets through: the proxy it trusts, the origins besides the app's own,
    the rate, and the features on (read from Chainlit's config at each request)."""

    trust: ProxyTrust
    allowed_origins: Sequence[str]
    rate: Rate
    body_timeout_s: float = 10.0  # a request's body arrives whole within this

    def own_origins(self, scope: Scope) -> set[str]:
        """The origin a page of this app has: the host it asked for, with its scheme
        (what a trusted proxy says of them, where one stands in front)."""
        headers = dict(scope.get("headers") or [])
        host = headers.get(b"host", b"").decode("latin-1")
        own = {f"{scope.get('scheme', 'http')}://{host}"} if host else set()
        forwarded = self.trust.forwarded_origin(scope)
        return own | ({forwarded} if forwarded else set())

    def cross_site(self, scope: Scope) -> bool:
        """A state-changing request a page of another origin sent through the browser."""
        if scope.get("method") not in UNSAFE_METHODS:
            return False
        origin = dict(scope.get("headers") or []).get(b"origin")
        if origin is None:  # not a browser's cross-origin request (curl, the page's GETs)
            return False
        text = origin.decode("latin-1")
        return text not in self.allowed_origins and text not in self.own_origins(scope)

    @staticmethod
    def feature_off(method: str, path: str) -> tuple[int, str] | None:
        """The refusal for a route of something the app does not do (None: it does), as
        Chainlit's configuration says now."""
        features = config.features
        uploads = bool(
            features.spontaneous_file_upload and features.spontaneous_file_upload.enabled
        )
        if path.endswith(UPLOAD_PATH) and method == "POST" and not uploads:
            return 403, "uploads are off: this model reads text only"
        if f"{UPLOAD_PATH}/" in path and not uploads:
            return 404, "no files are kept here"
        if any(part in path for part in SHARING_PATHS) and not features.allow_thread_sharing:
            return 404, "chats are not shared here"
        if path.endswith("/project/element") and method in ("PUT", "DELETE"):
            return 404, "this app has no elements to change"
        if path.endswith("/project/action") and not app_handles("action_callbacks"):
            return 404, "this app has no actions"
        if path.endswith("/mcp") and not features.mcp.enabled:
            return 404, "MCP is off here"
        return None


def _session_id_problem(scope: Scope) -> bool:
    """A ``session_id`` in the query that is not a canonical UUID."""
    query = parse_qs(bytes(scope.get("query_string") or b"").decode("latin-1"))
    return any(not canonical_uuid(value) for value in query.get("session_id", []))


def _body_refusal(path: str, body: bytes) -> tuple[str, int, str] | None:
    """(reason, status, detail) for a body the route may not take (None: it may)."""
    if _body_names_a_bad_session(body):
        return "session_id", 400, "the session id is not a UUID"
    if path.endswith("/project/action") and (refused := action_refusal(body)) is not None:
        return "action", *refused
    return None


def _body_names_a_bad_session(body: bytes) -> bool:
    """A JSON body whose session id is not a canonical UUID (other bodies: Chainlit's)."""
    try:
        data = json.loads(body)
    except ValueError:
        return False
    fields = data if isinstance(data, dict) else {}
    return any(name in fields and not canonical_uuid(fields[name]) for name in SESSION_FIELDS)


async def _too_slow(send: Send) -> None:
    metrics.REFUSED.labels(door="route", reason="body_slow").inc()
    await answer(send, 408, "the request's body came too slowly")


class RouteDoor:
    """The refusals above, in that order, for every HTTP request but Socket.IO's own
    (its events pass ``chat.access.front_door``)."""

    def __init__(self, app: ASGIApp, *, rules: RouteRules, socket_path: str) -> None:
        self.app = app
        self.rules = rules
        self.socket_path = socket_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        if path == self.socket_path or path.startswith(f"{self.socket_path}/"):
            return await self._socket(scope, receive, send)
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refusal = await self._refusal(scope, path)
        if refusal is not None:
            return await self._refuse(scope, receive, send, refusal)
        try:
            receive = under_deadline(receive, self.rules.body_timeout_s)
            if scope.get("method") in UNSAFE_METHODS and path.endswith(SESSION_BODY_PATHS):
                body = await whole_body(receive)
                refused = _body_refusal(path, body)
                if refused is not None:
                    metrics.REFUSED.labels(door="route", reason=refused[0]).inc()
                    return await answer(send, *refused[1:])
                receive = replayed(body, receive)
            await self.app(scope, counting(receive), send)
        except TooLarge:  # a body sent without its length
            await answer(send, 413, "request body too large")
        except TooSlow:
            await _too_slow(send)

    async def _socket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Engine.IO's requests: each socket it opens counted in the address's rate."""
        opens = scope["type"] == "websocket" or b"sid=" not in bytes(scope.get("query_string", b""))
        refusal = await self._rated(scope) if opens else None
        if refusal is None:
            timed = (
                receive
                if scope["type"] == "websocket"
                else under_deadline(receive, self.rules.body_timeout_s)
            )
            try:
                return await self.app(scope, timed, send)
            except TooSlow:
                return await _too_slow(send)
        if scope["type"] == "websocket":  # refused before it is accepted: a 403
            metrics.REFUSED.labels(door="route", reason="rate").inc()
            return await send({"type": "websocket.close", "code": 1008})
        await self._refuse(scope, receive, send, refusal)

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, refusal: tuple[str, int, str, list[Any]]
    ) -> None:
        reason, status, detail, headers = refusal
        metrics.REFUSED.labels(door="route", reason=reason).inc()
        declared = dict(scope.get("headers", [])).get(b"content-length", b"")
        if declared.isdigit() and int(declared) <= DRAINED_BYTES:
            with contextlib.suppress(TooSlow):  # read first: closing on unread bytes resets
                await whole_body(under_deadline(receive, self.rules.body_timeout_s))
        await answer(send, status, detail, headers)

    async def _rated(self, scope: Scope) -> tuple[str, int, str, list[Any]] | None:
        """The rate's refusal, if the address is past it (this request counted)."""
        rules = self.rules
        who, now = f"address:{rules.trust.address(scope)}", rules.rate.clock()
        if await rules.rate.allow(who, now=now):
            return None
        wait = b"%d" % math.ceil(await rules.rate.retry_after_s(who, now=now))
        return "rate", 429, "too many requests: try again shortly", [(b"retry-after", wait)]

    async def _refusal(self, scope: Scope, path: str) -> tuple[str, int, str, list[Any]] | None:
        """(reason, status, detail, headers) of the first rule the request breaks."""
        rules, method = self.rules, str(scope.get("method", "GET"))
        if path not in UNCOUNTED and (rated := await self._rated(scope)) is not None:
            return rated
        if rules.cross_site(scope):
            logger.warning("refused a %s %s sent from another site", method, path)
            return "cross_site", 403, "this request came from another site", []
        off = rules.feature_off(method, path)
        if off is not None:
            return "feature_off", off[0], off[1], []
        if _session_id_problem(scope):
            return "session_id", 400, "the session id is not a UUID", []
        declared = dict(scope.get("headers", [])).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > MAX_BODY_BYTES:
            return "body_size", 413, "request body too large", []
        return None
