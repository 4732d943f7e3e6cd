"""A chat's export and its shared link, fetched as its page fetches them: the button
posted over the tab's own HTTP session (a group's worker cookie), then the link the chat
was sent.

Usage::

    link, body = await exported(chat)   # "/export/<token>", and chat.json's text
    path = await shared_link(chat)      # "/shared/<token>" (None: the chat said no)
    await press(chat, "stop_sharing")   # a button of the app's, as the page presses it
"""

from __future__ import annotations

import re
import uuid

from .chat_client import ChatClient

__all__ = ["EXPORT", "exported", "press", "shared_link"]

EXPORT = {"name": "export", "payload": {}, "label": "Export"}  # the button, as posted


async def press(chat: ChatClient, name: str) -> str:
    """The app's button ``name`` pressed in ``chat``; the notice it answered with."""
    mark = len(chat.messages)
    action = {"name": name, "payload": {}, "label": name, "id": str(uuid.uuid4())}
    status, text = await chat.http(
        "POST", "/project/action", json={"sessionId": chat.session_id, "action": action}
    )
    assert status == 200, text
    return await chat.wait_for_message(lambda m: bool(m), since=mark)


async def shared_link(chat: ChatClient) -> str | None:
    """A read-only link to the chat, as its Share button makes one (None: refused)."""
    found = re.search(r"\]\((/shared/[\w-]+)\)", await press(chat, "share"))
    return found.group(1) if found else None


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
