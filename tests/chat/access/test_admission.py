"""A message is admitted before Chainlit keeps it: a refused one costs no disk, names no
chat, and a frame larger than any message needs is not read at all; a payload that is not
a chat message gets words, not the exception's text. On the real app with history
(``signed_app``), each visitor from an address of its own."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import uuid
from pathlib import Path

import httpx

from testing.accounts import PROXY, named, session_cookie
from testing.chat_client import ChatClient
from testing.polling import until
from testing.servers import AppServer
from testing.visitors import visitor

LONG_PASTE = "长" * 150_000  # 7.5 times the 20,000 characters a message may have


def history_bytes(folder: Path) -> int:
    """What the history holds: its pages in use (its WAL file keeps a copy of each page
    written until a checkpoint, whatever was written)."""
    with contextlib.closing(sqlite3.connect(folder / "history.db", timeout=60)) as db:
        used = db.execute("PRAGMA page_count").fetchone()[0]
        used -= db.execute("PRAGMA freelist_count").fetchone()[0]
        return int(used * db.execute("PRAGMA page_size").fetchone()[0])


def threads_of(url: str, cookie: dict[str, str]) -> list[dict[str, object]]:
    body = {"pagination": {"first": 20}, "filter": {}}
    answer = httpx.post(f"{url}/project/threads", json=body, headers=cookie, timeout=10)
    assert answer.status_code == 200, answer.text
    return list(json.loads(answer.text)["data"])


def header_user(url: str, name: str) -> dict[str, str]:
    return session_cookie(httpx.post(f"{url}/auth/header", headers=named(name) | PROXY))


async def test_refused_messages_are_not_stored_and_name_no_chat(
    signed_app: AppServer, users_file: Path
) -> None:
    """Five refused 3 MiB messages grew the history by 22 MB, and the chat took the first
    one's text as its name. (Two here: the app lets a user send three a minute.)"""
    url, folder = signed_app.url, users_file.parent
    cookie = header_user(url, "judy")
    before = history_bytes(folder)
    async with ChatClient.connect(url, headers=cookie, source=visitor()) as chat:
        for _ in range(2):
            refused = await chat.send(LONG_PASTE, timeout_s=60)
            assert refused.error is not None and "150,000 characters" in refused.error
        answered = await chat.send("你好", timeout_s=60)
        assert answered.error is None and answered.text
    (thread,) = threads_of(url, cookie)
    assert thread["name"] == "你好"
    outputs = [step["output"] for step in thread["steps"]]  # type: ignore[attr-defined]
    assert "你好" in outputs and not any(LONG_PASTE[:100] in str(o) for o in outputs)
    assert history_bytes(folder) - before < 200_000  # one short exchange, not 900 KB of paste


async def test_a_frame_larger_than_any_message_is_not_read(
    signed_app: AppServer, users_file: Path
) -> None:
    url, folder = signed_app.url, users_file.parent
    cookie = header_user(url, "karl")
    before = history_bytes(folder)
    async with ChatClient.connect(url, headers=cookie, source=visitor()) as chat:
        sending = asyncio.create_task(chat.send("长" * 600_000))  # 3.6 MB, escaped
        await until(lambda: chat.disconnects >= 1, 10, "the server's closing the socket")
        assert not sending.done()  # no answer: the server closed the socket unread
        sending.cancel()
    assert history_bytes(folder) - before < 100_000
    async with ChatClient.connect(url, headers=cookie, source=visitor()) as chat:
        assert (await chat.send("你好", timeout_s=60)).error is None  # the app goes on


async def test_a_payload_that_is_not_a_chat_message_gets_words(signed_app: AppServer) -> None:
    url = signed_app.url
    cookie = header_user(url, "lena")
    async with ChatClient.connect(url, headers=cookie, source=visitor()) as chat:
        for step in ({"output": 42}, {"output": None}, {"id": "not-a-uuid"}):
            refused = await chat.send("你好", step=step, timeout_s=60)
            assert refused.error is not None and "could not be read" in refused.error
            assert "NoneType" not in refused.error and "int" not in refused.error
        assert (await chat.send("你好", timeout_s=60)).error is None


async def test_an_edit_of_a_message_the_chat_never_had_gets_words(signed_app: AppServer) -> None:
    """Chainlit handed such an edit to the handler as no message at all: the client got
    nothing and the log a traceback."""
    url = signed_app.url
    cookie = header_user(url, "mona")
    async with ChatClient.connect(url, headers=cookie, source=visitor()) as chat:
        ghost = {"id": str(uuid.uuid4()), "output": "改一下", "type": "user_message"}
        mark = len(chat.messages)
        await chat.emit("edit_message", {"message": ghost})
        await chat.wait_for_message(lambda text: "could not be read" in text, since=mark)
        assert (await chat.send("你好", timeout_s=60)).error is None
    assert "Traceback" not in signed_app.log.read_text(errors="replace")
