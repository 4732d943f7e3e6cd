"""Export on the real app with sign-in and history (``signed_app``), as its user and as an
attacker: the link answers the chat's own user alone, and names no other chat."""

from __future__ import annotations

import re
import secrets
import uuid

from testing.accounts import PASSWORD, session_cookie
from testing.chat_client import ChatClient
from testing.servers import AppServer
from testing.visitors import http_client, visitor

SECRET = "导出测试：凯特的秘密"


def signed_in(url: str, name: str, source: str) -> dict[str, str]:
    """A password sign-in from ``source``; its session cookie, as headers."""
    with http_client(source) as http:
        answer = http.post(f"{url}/login", data={"username": name, "password": PASSWORD})
    assert answer.status_code == 200, answer.text
    return session_cookie(answer)


async def test_an_export_link_answers_its_own_user_alone(signed_app: AppServer) -> None:
    url, owner_at, other_at = signed_app.url, visitor(), visitor()
    owner, other = signed_in(url, "kate", owner_at), signed_in(url, "liam", other_at)
    async with ChatClient.connect(url, headers=owner, source=owner_at) as chat:
        assert (await chat.send(SECRET, timeout_s=120)).error is None
        mark = len(chat.messages)
        button = {"name": "export", "payload": {}, "id": str(uuid.uuid4()), "label": "Export"}
        with http_client(owner_at) as http:  # the button, as the page posts it
            body = {"sessionId": chat.session_id, "action": button}
            clicked = http.post(f"{url}/project/action", json=body, headers=owner)
        assert clicked.status_code == 200, clicked.text
        links = await chat.wait_for_message(lambda m: "/export/" in m, since=mark)
        found = re.search(r"\((/export/[\w-]+)/chat\.md\)", links)
        assert found, links
        base = url + found.group(1)
        with http_client(owner_at) as http:
            markdown = http.get(f"{base}/chat.md", headers=owner)
            exported = http.get(f"{base}/chat.json", headers=owner).json()
        assert markdown.status_code == 200 and SECRET in markdown.text
        assert markdown.headers["content-disposition"].startswith("attachment")
        assert [m["role"] for m in exported["messages"]] == ["user", "assistant"]
        assert exported["messages"][0]["text"] == SECRET
        assert "tokens" in " ".join(exported["messages"][1]["notes"])  # the reply's notes
        with http_client(other_at) as http:  # another user, the link in hand
            assert http.get(f"{base}/chat.md", headers=other).status_code == 403
            assert http.get(f"{base}/chat.json").status_code == 401  # no one signed in
            forged = f"{url}/export/{secrets.token_urlsafe(18)}/chat.md"
            assert http.get(forged, headers=other).status_code == 404
            assert http.get(f"{base}/chat.txt", headers=owner).status_code == 404
