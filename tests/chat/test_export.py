"""Export on the real app with sign-in and history (``signed_app``), as its user and as an
attacker: the link answers the chat's own user alone, and names no other chat."""

from __future__ import annotations

import re
import secrets
import uuid

from testing.accounts import PASSWORD, sign_in
from testing.chat_client import ChatClient
from testing.servers import AppServer
from testing.visitors import http_client, visitor

SECRET = "导出测试：爱丽丝的秘密"


async def test_an_export_link_answers_its_own_user_alone(signed_app: AppServer) -> None:
    url, alice_at, frank_at = signed_app.url, visitor(), visitor()
    alice, frank = sign_in(url, "alice", PASSWORD), sign_in(url, "frank", PASSWORD)
    async with ChatClient.connect(url, headers=alice, source=alice_at) as chat:
        assert (await chat.send(SECRET, timeout_s=120)).error is None
        mark = len(chat.messages)
        button = {"name": "export", "payload": {}, "id": str(uuid.uuid4()), "label": "Export"}
        with http_client(alice_at) as http:  # the button, as the page posts it
            body = {"sessionId": chat.session_id, "action": button}
            clicked = http.post(f"{url}/project/action", json=body, headers=alice)
        assert clicked.status_code == 200, clicked.text
        links = await chat.wait_for_message(lambda m: "/export/" in m, since=mark)
        found = re.search(r"\((/export/[\w-]+)/chat\.md\)", links)
        assert found, links
        base = url + found.group(1)
        with http_client(alice_at) as http:
            markdown = http.get(f"{base}/chat.md", headers=alice)
            exported = http.get(f"{base}/chat.json", headers=alice).json()
        assert markdown.status_code == 200 and SECRET in markdown.text
        assert markdown.headers["content-disposition"].startswith("attachment")
        assert [m["role"] for m in exported["messages"]] == ["user", "assistant"]
        assert exported["messages"][0]["text"] == SECRET
        assert "tokens" in " ".join(exported["messages"][1]["notes"])  # the reply's notes
        with http_client(frank_at) as http:  # another user, the link in hand
            assert http.get(f"{base}/chat.md", headers=frank).status_code == 403
            assert http.get(f"{base}/chat.json").status_code == 401  # no one signed in
            forged = f"{url}/export/{secrets.token_urlsafe(18)}/chat.md"
            assert http.get(forged, headers=frank).status_code == 404
            assert http.get(f"{base}/chat.txt", headers=alice).status_code == 404
