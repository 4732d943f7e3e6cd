"""A chat's export fetched as its page fetches it: the export button posted over the tab's
own HTTP session (a group's worker cookie), then the link the chat was sent.

Usage::

    link, body = await exported(chat)   # "/export/<token>", and chat.json's text
"""

from __future__ import annotations

import re
import uuid

from .chat_client import ChatClient

__all__ = ["EXPORT", "exported"]

EXPORT = {"name": "export", "payload": {}, "label": "Export"}  # the button, as posted


async def exported(chat: ChatClient) -> tuple[str, str]:
    """The chat's export link (``/export/<token>``) and its JSON."""
    mark = len(chat.messages)
    body = {"sessionId": chat.session_id, "action": EXPORT | {"id": str(uuid.uuid4())}}
    status, text = await chat.http("POST", "/project/action", json=body)
    assert status == 200, text
    links = await chat.wait_for_message(lambda m: "/export/" in m, since=mark)
    found = re.search(r"\((/export/[\w-]+)/chat\.md\)", links)
    assert found, links
    status, text = await chat.http("GET", f"{found.group(1)}/chat.json")
    assert status == 200, text
    return found.group(1), text
