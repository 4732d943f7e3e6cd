"""Every Socket.IO event passes the front door before Chainlit keeps anything, on the real
app over Socket.IO, each visitor from an address of its own: without sign-in
(``open_app``) and with it and the history (``signed_app``).

The critical one: Chainlit made a session's files folder of the session id the client
chose, wrote into it and deleted it at the session's end, so any folder the app may
delete was one handshake and two events away.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import socketio

from testing.accounts import PROXY, named, session_cookie
from testing.chat_client import ChatClient
from testing.polling import until
from testing.servers import AppServer
from testing.visitors import http_client, visitor

PAGE_SETTINGS = {"temperature": 0.5, "top_p": 0.9, "max_tokens": 64, "system_prompt": "zh"}


def header_user(url: str, name: str) -> dict[str, str]:
    return session_cookie(httpx.post(f"{url}/auth/header", headers=named(name) | PROXY))


def canary(folder: Path) -> Path:
    """A folder outside the app, with a file in it: what an attacker would delete."""
    kept = folder / "canary" / "keep"
    kept.mkdir(parents=True)
    (kept / "file").write_text("still here")
    return folder / "canary"


def intact(target: Path) -> bool:
    """The canary, as it was: its one file, nothing added."""
    found = sorted(p.relative_to(target).as_posix() for p in target.rglob("*"))
    return found == ["keep", "keep/file"] and (target / "keep" / "file").read_text() == "still here"


def pointing_at(target: Path) -> list[str]:
    """Session ids that name ``target``: itself, and a walk up from the files folder."""
    return [str(target), "../" * 16 + str(target).lstrip("/"), f"{target}/../canary"]


async def attack(url: str, session_id: str, headers: dict[str, str]) -> bool:
    """The attack as it was seen: a socket whose session id is a folder, a custom element
    written into it, then ``clear_session`` and a disconnect (Chainlit removed the folder);
    whether the socket was let in."""
    element = {"id": str(uuid.uuid4()), "type": "custom", "name": "x", "display": "inline"}
    try:
        async with ChatClient.connect(
            url,
            headers=headers,
            source=visitor(),
            settle=False,
            handshake={"sessionId": session_id},
        ) as chat:
            body = {"element": element | {"props": {"a": 1}}, "sessionId": session_id}
            httpx.put(f"{url}/project/element", json=body, headers=headers, timeout=10)
            await chat.emit("clear_session", None)
            await asyncio.sleep(0.3)
    except socketio.exceptions.ConnectionError:
        return False
    await asyncio.sleep(0.5)  # the disconnect's handler ran
    return True


@pytest.mark.engine  # the apps on the session's vllm serve, named by parameter
@pytest.mark.parametrize("app_name", ["open_app", "signed_app", "signed_group"])
async def test_a_session_id_that_names_a_folder_is_refused_and_deletes_nothing(
    request: pytest.FixtureRequest, app_name: str, tmp_path: Path
) -> None:
    """An anonymous visitor, a signed-in user, and one through the group's HAProxy."""
    app: AppServer = request.getfixturevalue(app_name)
    headers = header_user(app.url, "nina") if app_name != "open_app" else {}
    target = canary(tmp_path)
    let_in = [await attack(app.url, sid, headers) for sid in pointing_at(target)]
    assert intact(target), "the canary folder was deleted or written into"
    assert let_in == [False, False, False]
    for odd in (str(uuid.uuid4()).upper(), "{" + str(uuid.uuid4()) + "}", "", None, 7):
        assert not await attack(app.url, odd, headers)  # type: ignore[arg-type]
    async with ChatClient.connect(app.url, headers=headers, source=visitor()) as chat:
        assert (await chat.send("你好")).error is None  # a page's own handshake goes on


def evil_id(target: Path) -> str:
    return "../" * 16 + str(target.relative_to("/"))


def route_attacks(evil: str) -> list[tuple[str, str, Any]]:
    """Every route of Chainlit's that takes an id from the client, with ``evil`` as each."""
    element = {"id": evil, "type": "custom", "name": "x", "display": "inline", "props": {}}
    element |= {"threadId": evil, "forId": evil}
    return [
        ("PUT", "/project/element", {"element": element, "sessionId": evil}),
        ("DELETE", "/project/element", {"element": element, "sessionId": evil}),
        ("POST", "/project/action", {"action": {"name": "x", "payload": {}, "id": evil}}),
        ("GET", f"/project/file/{evil}?session_id={evil}", None),
        ("PUT", "/feedback", {"feedback": {"forId": evil, "value": 1}, "sessionId": evil}),
        ("DELETE", "/feedback", {"feedbackId": evil}),
        ("GET", f"/project/thread/{evil}", None),
        ("GET", f"/project/thread/{evil}/element/{evil}", None),
        ("GET", f"/project/share/{evil}", None),
        ("PUT", "/project/thread", {"threadId": evil, "name": "x"}),
        ("DELETE", "/project/thread", {"threadId": evil}),
        ("PUT", "/project/thread/share", {"threadId": evil, "isShared": True}),
        ("GET", f"/avatars/{evil}", None),
        ("GET", f"/public/{evil}", None),
        ("GET", f"/assets/{evil}", None),
        ("GET", f"/copilot/{evil}", None),
        ("POST", "/set-session-cookie", {"session_id": evil}),
        ("POST", "/mcp", {"sessionId": evil, "name": evil, "clientType": "sse", "url": evil}),
        ("DELETE", "/mcp", {"sessionId": evil, "name": evil}),
    ]


async def test_no_id_a_client_names_reaches_a_path(signed_app: AppServer, tmp_path: Path) -> None:
    """Each route and event that takes an id, given one that walks to a folder outside
    the app: the folder is untouched, and every change is refused."""
    url, target = signed_app.url, canary(tmp_path)
    evil, cookie = evil_id(target), header_user(signed_app.url, "oscar")
    with http_client(visitor(), headers=cookie) as http:
        for method, path, body in route_attacks(evil):
            answer = http.request(method, url + path, json=body)
            assert method == "GET" or answer.status_code >= 400, (method, path, answer.text)
        files = {"file": ("x.txt", b"planted", "text/plain")}
        upload = http.post(f"{url}/project/file", params={"session_id": evil}, files=files)
        assert upload.status_code >= 400
    message = {"id": evil, "threadId": evil, "parentId": evil, "output": "你好"}
    async with ChatClient.connect(url, headers=cookie, source=visitor()) as chat:
        for event, data in [
            ("client_message", {"message": message, "fileReferences": [{"id": evil}]}),
            ("edit_message", {"message": message}),
            ("message_favorite", {"message": message}),
            ("chat_settings_change", {"system_prompt": evil}),
        ]:
            await chat.emit(event, data)

        def refusals() -> int:  # the message, the edit and the settings: each in words
            return sum("could not be read" in m or "not taken" in m for m in chat.messages)

        await until(lambda: refusals() >= 3, 30, "the refusals in words")
        assert (await chat.send("你好")).error is None  # the chat goes on
    assert not await attack(url, evil, cookie)
    assert intact(target), "a client-named id reached the canary folder"


def thread_of(url: str, cookie: dict[str, str], thread_id: str) -> dict[str, Any]:
    answer = httpx.get(f"{url}/project/thread/{thread_id}", headers=cookie, timeout=10)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def stored_steps(url: str, cookie: dict[str, str], thread_id: str, last: str) -> list[Any]:
    """The chat's steps once its message ``last`` is stored (Chainlit writes them in tasks
    of their own, after the reply's end)."""

    def steps() -> list[Any] | None:
        found = thread_of(url, cookie, thread_id)["steps"]
        return found if any(s.get("output") == last for s in found) else None

    return list(await until(steps, 20, f"{last!r} in the history", interval_s=0.2))


async def test_settings_the_panel_cannot_send_are_not_stored(signed_app: AppServer) -> None:
    """``chat_settings_change`` stored whatever it was sent in the session (kept an hour,
    and in the chat's history) before the panel's check refused it: 172 MB in 5 s."""
    url, cookie = signed_app.url, header_user(signed_app.url, "paula")
    async with ChatClient.connect(url, headers=cookie, source=visitor()) as chat:
        assert (await chat.send("你好")).error is None
        mark = len(chat.messages)
        await chat.change_settings(PAGE_SETTINGS | {"junk": "垃圾" * 50})  # a field of no panel
        await chat.wait_for_message(lambda m: "no such setting" in m, since=mark)
        await chat.change_settings(PAGE_SETTINGS | {"junk": "x" * 100_000})  # larger than any
        await chat.change_settings(PAGE_SETTINGS)  # the panel's own: taken
        thread_id = chat.thread_id
    assert thread_id is not None

    def kept() -> str | None:  # the disconnect stores the session's settings, in a task
        stored = thread_of(url, cookie, thread_id)["metadata"]
        text = stored if isinstance(stored, str) else json.dumps(stored or {})
        return text if "chat_settings" in text else None

    text = await until(kept, 20, "the chat's settings stored", interval_s=0.2)
    assert "junk" not in text and "垃圾" not in text
    assert json.loads(text)["chat_settings"] == PAGE_SETTINGS


async def test_a_resumed_chat_is_read_and_sent_once_per_socket(signed_app: AppServer) -> None:
    """Every ``connection_successful`` of a resumed chat's socket read the whole chat again
    and sent it again: 16 s a time for a long chat, the database pool used up."""
    url, cookie = signed_app.url, header_user(signed_app.url, "quinn")
    async with ChatClient.connect(url, headers=cookie, source=visitor()) as chat:
        assert (await chat.send("你好")).error is None
        thread_id = chat.thread_id
    async with ChatClient.connect(
        url, headers=cookie, source=visitor(), thread_id=thread_id
    ) as again:
        assert again.resumes == 1
        for _ in range(5):
            await again.emit("connection_successful", None)
        assert (await again.send("再来")).error is None
        await asyncio.sleep(0.5)  # what the last of them sent has arrived
        assert again.resumes == 1, f"the chat was resumed {again.resumes} times on one socket"


async def test_a_stop_with_nothing_to_stop_stores_nothing(signed_app: AppServer) -> None:
    """Every ``stop`` stored a "Task manually stopped." message: 3,000 rows in 18 s."""
    url, cookie = signed_app.url, header_user(signed_app.url, "rosa")
    async with ChatClient.connect(url, headers=cookie, source=visitor()) as chat:
        assert (await chat.send("你好")).error is None
        for _ in range(20):
            await chat.stop()
        assert (await chat.send("再来")).error is None
        thread_id = chat.thread_id
    assert thread_id is not None
    steps = await stored_steps(url, cookie, thread_id, "再来")
    stopped = [s for s in steps if "manually stopped" in (s.get("output") or "")]
    assert not stopped, f"{len(stopped)} stop notices stored"
    assert not any("manually stopped" in m for m in chat.messages)


async def test_a_message_larger_than_the_page_sends_goes_nowhere(signed_app: AppServer) -> None:
    """A message's fields besides its text (its metadata) were stored as they came."""
    url, cookie = signed_app.url, header_user(signed_app.url, "sven")
    async with ChatClient.connect(url, headers=cookie, source=visitor()) as chat:
        assert (await chat.send("你好")).error is None
        padded = {"id": str(uuid.uuid4()), "threadId": "", "name": "User", "output": "大的"}
        padded |= {"type": "user_message", "createdAt": datetime.now(UTC).isoformat()}
        padded |= {"metadata": {"pad": "x" * 200_000}}
        await chat.emit("client_message", {"message": padded, "fileReferences": []})
        assert (await chat.send("再来")).error is None
        thread_id = chat.thread_id
    assert thread_id is not None
    outputs = [s.get("output") for s in await stored_steps(url, cookie, thread_id, "再来")]
    assert "大的" not in outputs


async def test_a_flood_of_events_closes_its_socket_and_costs_others_nothing(
    open_app: AppServer,
) -> None:
    """Past ERNIE_REQUESTS_PER_MINUTE (600: 200 at once) a socket is closed."""
    url = open_app.url
    async with ChatClient.connect(url, source=visitor()) as flood:
        for _ in range(400):
            await flood.emit("chat_settings_edit", {"temperature": 1})
        await until(lambda: flood.disconnects >= 1, 10, "the server's closing the flood")
    async with ChatClient.connect(url, source=visitor()) as other:
        assert (await other.send("你好")).error is None


async def test_new_chats_from_one_address_are_rated(open_app: AppServer) -> None:
    """600 chats opened and closed in 36 s from one address each kept its session's memory
    for an hour: ERNIE_NEW_CHATS_PER_MINUTE (60: 20 at once) a minute per address."""
    url, here = open_app.url, visitor()
    refused, started = 0, time.monotonic()
    for _ in range(40):
        try:
            async with ChatClient.connect(url, source=here, settle=False):
                pass
        except socketio.exceptions.ConnectionError:
            refused += 1
    # 20 at once, one more a second: the rest refused (this machine's speed aside)
    allowed = 20 + math.ceil(time.monotonic() - started) + 1
    assert refused >= max(1, 40 - allowed), f"{refused} of 40 new chats refused"
    assert f"chat refused: {here} opens chats too often" in open_app.log.read_text()
    async with ChatClient.connect(url, source=visitor()) as other:  # another address
        assert (await other.send("你好")).error is None


def sessions_held(url: str) -> int:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    found = re.search(r"^ernie_sessions_held (\S+)$", text, re.M)
    assert found, "no ernie_sessions_held in /metrics"
    return int(float(found.group(1)))


async def test_a_closed_tabs_session_gives_its_memory_back_in_minutes(open_app: AppServer) -> None:
    """Closed tabs kept their sessions an hour; ERNIE_SESSION_KEEP_MINUTES (open_app: 3 s)."""
    url = open_app.url
    async with contextlib.AsyncExitStack() as tabs:
        for _ in range(6):
            await tabs.enter_async_context(ChatClient.connect(url, source=visitor()))
        held = sessions_held(url)
        assert held >= 6
    await until(lambda: sessions_held(url) <= held - 6, 15, "the closed tabs' sessions dropped")
