"""What ``POST /project/action`` must carry before Chainlit runs it.

Chainlit looks the session up and builds an ``Action`` from the body as it comes: an
unknown session or an action with a field it lacks ended in a 500 and ~4.8 KB of
traceback on the console each (2.9 MB a minute from one address). Here the body must be
one of this page's buttons: a JSON object whose ``action`` has only ``Action``'s fields,
each of its type, a name the app registered, and a session this worker holds (400 or
404, said in one line; whether the session is the caller's is Chainlit's check, 401).

Usage (``chat.access.route_door``, with the body read)::

    refusal = action_refusal(body)   # (status, detail), or None: Chainlit runs it
"""

from __future__ import annotations

import json

from ..chainlit_door import action_names, session_by_id

__all__ = ["action_refusal"]

_TEXT, _OPTIONAL = (str,), (str, type(None))
FIELDS: dict[str, tuple[type, ...]] = {  # chainlit.action.Action's, and their types
    "name": _TEXT,
    "payload": (dict,),
    "label": _TEXT,
    "tooltip": _TEXT,
    "icon": _OPTIONAL,
    "forId": _OPTIONAL,
    "id": _TEXT,
}
REQUIRED = ("name", "payload")


def action_refusal(body: bytes) -> tuple[int, str] | None:
    """Why the body is no button of this app's on a chat of this worker's (None: it is)."""
    try:
        data = json.loads(body)
    except ValueError:
        return 400, "the action is not JSON"
    action = data.get("action") if isinstance(data, dict) else None
    if not isinstance(action, dict):
        return 400, "no action"
    wrong = [key for key, value in action.items() if not isinstance(value, FIELDS.get(key, ()))]
    if wrong or any(key not in action for key in REQUIRED):
        return 400, "the action is not one of this page's buttons"
    if action["name"] not in action_names():
        return 404, "this app has no such action"
    session = data.get("sessionId")
    if not isinstance(session, str) or session_by_id(session) is None:
        return 404, "no such chat here"
    return None
