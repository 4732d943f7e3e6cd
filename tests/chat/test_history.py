"""Chat history on a real SQLite file and a real PostgreSQL server (Debian's, started here):
a signed-in user's chat is written, the app is restarted, the chat is listed and resumed
with its messages, and the model sees the earlier exchange again. Another user neither
sees nor opens it.

The app runs on the remote backend (the session's one ``vllm serve``): what restarts is
the app process and its database connection, which is what is tested, not the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import socketio

from chat.conversation import Conversation
from chat.history import create_schema
from deploy.database import database_url
from deploy.users import add_user
from testing.browser import STATS_LINE
from testing.chat_client import ChatClient, Reply, wait_ready
from testing.servers import AppServer, Server, free_port

PASSWORD = "history-pass-1"
SECRET = "history-secret-" + "x" * 40
FIRST = "请记住：我的猫叫小花。"
SECOND = "我的猫叫什么名字？"
LONG = "请写一篇很长的文章。"


# --- the conversation a resumed chat rebuilds (no server) ------------------------------
def test_restore_replays_recorded_exchanges_and_skips_other_messages() -> None:
    live = Conversation()
    stored: list[Any] = [
        {"kind": "a notice"},
        None,
        "not json",
        json.dumps(live.record("m1", "你好", "你好！")),  # as the databases hand it back
        live.record("m2", "第二", "二"),
        {"exchange": {"message_id": "m3", "unknown_field": 1}},  # another version's
    ]
    live.rewind_to("m2")  # the user edited m2 and it was answered again
    stored.append(live.record("m2", "第二（改）", "二！"))
    restored = Conversation.restore(stored)
    assert restored.turns() == live.turns()
    assert [t.content for t in restored.turns()] == ["你好", "你好！", "第二（改）", "二！"]


async def test_schema_is_created_once_and_left_alone(tmp_path: Path) -> None:
    url = database_url(f"sqlite:///{tmp_path / 'sub' / 'history.db'}")
    await create_schema(url)
    await create_schema(url)  # again: nothing changes, nothing fails
    assert (tmp_path / "sub" / "history.db").stat().st_size > 0


# --- a real PostgreSQL server ------------------------------------------------------------
def _postgres_bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    assert found, "PostgreSQL is not installed: apt-get install postgresql (scripts/test.sh)"
    return found[-1].parent


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run it as Debian's postgres user then."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    bin_dir = _postgres_bin()
    data = Path(
        subprocess.check_output(
            _as_postgres(["mktemp", "-d", "/tmp/ernie-pg-XXXXXX"]), text=True
        ).strip()
    )
    subprocess.run(
        _as_postgres(
            [str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"]
        ),
        check=True,
        capture_output=True,
    )
    port = free_port()
    server = subprocess.Popen(
        _as_postgres(
            [
                str(bin_dir / "postgres"),
                "-D",
                str(data),
                "-p",
                str(port),
                "-h",
                "127.0.0.1",
                "-k",
                str(data),
                "-F",
            ]
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while (
            subprocess.run(
                [str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
                capture_output=True,
            ).returncode
            != 0
        ):
            assert server.poll() is None, "PostgreSQL exited at start"
            assert time.monotonic() < deadline, "PostgreSQL not ready after 60 s"
            time.sleep(0.3)
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(data, ignore_errors=True)


# --- the app, restarted over the same database -----------------------------------------
@dataclass(frozen=True)
class Remote:
    """The engine the apps of this module use: the session's ``vllm serve``."""

    model: Path
    url: str


@pytest.fixture(scope="module")
def remote(scripted_model: Path, vllm_server: Server) -> Remote:
    return Remote(scripted_model, vllm_server.url)


@contextlib.contextmanager
def app_on(remote: Remote, folder: Path, history_url: str) -> Iterator[AppServer]:
    users = folder / "users.txt"
    if not users.exists():
        add_user(users, "alice", PASSWORD)
        add_user(users, "bob", PASSWORD)
    env = {
        "ERNIE_MODEL": str(remote.model),
        "ERNIE_ENGINE": "remote",
        "ERNIE_REMOTE_URL": remote.url,
        "ERNIE_MAX_MODEL_LEN": "2048",
        "ERNIE_MAX_TOKENS": "24",
        "ERNIE_WARMUP": "false",
        "ERNIE_USERS_FILE": str(users),
        "ERNIE_HISTORY_URL": history_url,
        "CHAINLIT_AUTH_SECRET": SECRET,
    }
    with AppServer.run(env, folder / "app.log") as app:
        app.wait("/", timeout_s=180)
        yield app


def sign_in(url: str, name: str) -> dict[str, str]:
    response = httpx.post(f"{url}/login", data={"username": name, "password": PASSWORD})
    assert response.status_code == 200, response.text
    return {"Cookie": "; ".join(f"{k}={v}" for k, v in response.cookies.items())}


def thread_ids(url: str, cookie: dict[str, str]) -> list[str]:
    """The chats the sidebar lists for this user."""
    body = {"pagination": {"first": 20}, "filter": {}}
    response = httpx.post(f"{url}/project/threads", json=body, headers=cookie, timeout=10)
    assert response.status_code == 200, response.text
    return [thread["id"] for thread in response.json()["data"]]


def prompt_tokens(reply: Reply) -> int:
    """The prompt size the reply's stats line reports."""
    assert reply.error is None and reply.final, reply
    found = re.search(r"prompt (\d+) tokens", reply.final)
    assert found, reply.final
    return int(found.group(1))


async def stop_a_long_reply(chat: ChatClient) -> str:
    """Ask for a long reply, press stop once its text streams; what was written."""
    await chat.change_settings(
        {"temperature": 0.8, "top_p": 0.8, "max_tokens": 1024, "system_prompt": "zh"}
    )
    previous = chat.reply
    sending = asyncio.create_task(chat.send(LONG, timeout_s=120))
    while chat.reply is previous or chat.reply is None or len(chat.reply.frames) < 3:
        await asyncio.sleep(0.02)
    await chat.stop()
    reply = await sending
    assert reply.error is None and STATS_LINE not in reply.text  # stopped, not finished
    return reply.text


async def chat_survives_a_restart(remote: Remote, folder: Path, history_url: str) -> None:
    with app_on(remote, folder, history_url) as app:
        await wait_ready(app.url, 300)
        alice = sign_in(app.url, "alice")
        async with ChatClient.connect(app.url, headers=alice) as chat:
            first = await chat.send(FIRST, timeout_s=120)
            thread_id = chat.thread_id
            stopped = await stop_a_long_reply(chat)
        assert first.error is None and first.final and thread_id
        async with ChatClient.connect(app.url, headers=alice) as fresh:
            fresh_prompt = prompt_tokens(await fresh.send(SECOND, timeout_s=120))  # no history

    with app_on(remote, folder, history_url) as app:  # a new process, the same database
        await wait_ready(app.url, 300)
        alice = sign_in(app.url, "alice")
        assert thread_id in thread_ids(app.url, alice)
        async with ChatClient.connect(app.url, headers=alice, thread_id=thread_id) as chat:
            resumed = chat.resumed_thread
            assert resumed is not None, "the app did not resume the chat"
            outputs = [step["output"] for step in resumed["steps"]]
            assert FIRST in outputs and first.final in outputs
            assert stopped in outputs  # a stopped reply is kept as far as it went
            second = await chat.send(SECOND, timeout_s=120)
        # The model saw the first exchange again: the resumed prompt holds it.
        assert prompt_tokens(second) > fresh_prompt + len(FIRST)

        bob = sign_in(app.url, "bob")
        assert thread_id not in thread_ids(app.url, bob)
        with pytest.raises(socketio.exceptions.ConnectionError):
            async with ChatClient.connect(app.url, headers=bob, thread_id=thread_id):
                pass


async def test_sqlite_history_survives_a_restart(remote: Remote, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'history.db'}"
    await chat_survives_a_restart(remote, tmp_path, url)
    assert (tmp_path / "history.db").stat().st_size > 0


async def test_postgresql_history_survives_a_restart(
    remote: Remote, tmp_path: Path, postgres_url: str
) -> None:
    await chat_survives_a_restart(remote, tmp_path, postgres_url)


async def test_an_unreachable_database_stops_the_app_in_one_line(
    remote: Remote, tmp_path: Path
) -> None:
    url = f"postgresql://nobody:secret-pw@127.0.0.1:{free_port()}/none"
    with pytest.raises(RuntimeError) as stopped, app_on(remote, tmp_path, url):
        pass
    log = (tmp_path / "app.log").read_text()
    line = next(line for line in log.splitlines() if line.startswith("error: "))
    assert "ERNIE_HISTORY_URL=" in line and "cannot open the chat history" in line
    assert "secret-pw" not in log and "***" in line
    assert "exited" in str(stopped.value)
