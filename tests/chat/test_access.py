"""Access: sign-in from a users file or a trusted proxy's header, and per-user limits.

The app tests run the real Chainlit server with sign-in on: a websocket without a
session Chainlit signed is refused; a wrong password fails; the right one gets a session
whose websocket chats.
"""

from __future__ import annotations

import io
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import socketio

from chat.limits import WINDOW_S, LimitExceededError, UserLimits
from deploy.users import UserFileError, add_user, verify_password
from engine.cli import main
from testing.chat_client import ChatClient, wait_ready
from testing.servers import AppServer, Server

PASSWORD = "correct horse battery"


def test_users_file_keeps_salted_hashes_and_checks_passwords(tmp_path: Path) -> None:
    users = tmp_path / "users.txt"
    add_user(users, "alice", PASSWORD)
    add_user(users, "bob", PASSWORD)
    text = users.read_text()
    assert PASSWORD not in text and text.count("scrypt") == 2
    assert len(set(line.split(":")[5] for line in text.splitlines())) == 2  # own salts
    assert stat.S_IMODE(users.stat().st_mode) == 0o600
    assert verify_password(users, "alice", PASSWORD)
    assert not verify_password(users, "alice", PASSWORD + "!")
    assert not verify_password(users, "carol", PASSWORD)
    add_user(users, "alice", "a new password")  # a reset replaces the line
    assert not verify_password(users, "alice", PASSWORD)
    assert verify_password(users, "alice", "a new password")
    assert verify_password(users, "bob", PASSWORD)
    with pytest.raises(UserFileError, match="at least 8"):
        add_user(users, "dave", "short")
    with pytest.raises(UserFileError, match="user name"):
        add_user(users, "no spaces", PASSWORD)
    users.write_text(text + "broken line\n")
    with pytest.raises(UserFileError, match=":3:"):
        verify_password(users, "alice", PASSWORD)


def test_add_user_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    users = tmp_path / "users.txt"
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    assert main(["add-user", "alice", "--users-file", str(users)]) == 0
    assert "alice can sign in" in capsys.readouterr().out
    assert verify_password(users, "alice", PASSWORD)
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    assert main(["add-user", "bob", "--users-file", str(users)]) == 2
    assert "at least 8 characters" in capsys.readouterr().err


def test_limits_count_replies_at_once_and_messages_a_minute() -> None:
    limits = UserLimits(max_replies=2, per_minute=3)
    limits.admit("alice", now=0)
    limits.admit("alice", now=1)
    with pytest.raises(LimitExceededError) as busy:
        limits.admit("alice", now=2)
    assert busy.value.limit == "replies" and busy.value.retry_after_s is None
    limits.admit("bob", now=2)  # one user's limits are not another's
    limits.done("alice")
    limits.admit("alice", now=3)  # a reply ended: room again; the third this minute
    limits.done("alice")
    with pytest.raises(LimitExceededError) as fast:
        limits.admit("alice", now=10)
    assert fast.value.limit == "per_minute" and fast.value.retry_after_s == WINDOW_S - 10
    limits.admit("alice", now=WINDOW_S + 0.5)  # the first message left the window


SECRET = "test-secret-" + "x" * 40


@pytest.fixture(scope="module")
def signed_app(
    scripted_model: Path, vllm_server: Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AppServer]:
    """The app with sign-in on, on the remote backend (the session's ``vllm serve``): what
    is tested is the app's doors, not the engine."""
    folder = tmp_path_factory.mktemp("access")
    users = folder / "users.txt"
    add_user(users, "alice", PASSWORD)
    env = {
        "ERNIE_MODEL": str(scripted_model),
        "ERNIE_ENGINE": "remote",
        "ERNIE_REMOTE_URL": vllm_server.url,
        "ERNIE_MAX_MODEL_LEN": "2048",
        "ERNIE_MAX_TOKENS": "64",
        "ERNIE_WARMUP": "false",
        "ERNIE_USERS_FILE": str(users),
        "ERNIE_AUTH_HEADER": "X-Forwarded-User",
        "ERNIE_USER_MAX_REPLIES": "1",
        "ERNIE_USER_MESSAGES_PER_MINUTE": "3",
        "CHAINLIT_AUTH_SECRET": SECRET,
        "ERNIE_HISTORY_URL": f"sqlite:///{folder / 'history.db'}",
    }
    with AppServer.run(env, folder / "app.log") as server:
        server.wait("/", timeout_s=180)
        yield server


def session_cookie(response: httpx.Response) -> dict[str, str]:
    cookies = "; ".join(f"{name}={value}" for name, value in response.cookies.items())
    assert cookies, response.headers
    return {"Cookie": cookies}


async def test_without_a_session_the_websocket_and_the_api_are_refused(
    signed_app: AppServer,
) -> None:
    await wait_ready(signed_app.url, 300)
    with pytest.raises(socketio.exceptions.ConnectionError):
        async with ChatClient.connect(signed_app.url):
            pass
    forged = {"Cookie": "access_token=" + "e30.e30.forged"}
    with pytest.raises(socketio.exceptions.ConnectionError):
        async with ChatClient.connect(signed_app.url, headers=forged):
            pass
    assert httpx.get(f"{signed_app.url}/user", timeout=10).status_code == 401


async def test_a_wrong_password_fails_and_the_right_one_chats(signed_app: AppServer) -> None:
    await wait_ready(signed_app.url, 300)
    login = f"{signed_app.url}/login"
    wrong = httpx.post(login, data={"username": "alice", "password": "wrong!"}, timeout=10)
    assert wrong.status_code == 401
    unknown = httpx.post(login, data={"username": "mallory", "password": PASSWORD}, timeout=10)
    assert unknown.status_code == 401
    right = httpx.post(login, data={"username": "alice", "password": PASSWORD}, timeout=10)
    assert right.status_code == 200
    me = httpx.get(f"{signed_app.url}/user", headers=session_cookie(right), timeout=10)
    assert me.json()["identifier"] == "alice"
    async with ChatClient.connect(signed_app.url, headers=session_cookie(right)) as chat:
        reply = await chat.send("你好")
    assert reply.error is None and reply.text


async def test_a_trusted_proxy_header_signs_in(signed_app: AppServer) -> None:
    await wait_ready(signed_app.url, 300)
    header = f"{signed_app.url}/auth/header"
    assert httpx.post(header, timeout=10).status_code == 401
    signed = httpx.post(header, headers={"X-Forwarded-User": "bob"}, timeout=10)
    assert signed.status_code == 200
    me = httpx.get(f"{signed_app.url}/user", headers=session_cookie(signed), timeout=10)
    assert me.json()["identifier"] == "bob"


async def test_per_user_limits_answer_politely_and_count_the_user_not_the_chat(
    signed_app: AppServer,
) -> None:
    await wait_ready(signed_app.url, 300)
    signed = httpx.post(
        f"{signed_app.url}/auth/header", headers={"X-Forwarded-User": "carol"}, timeout=10
    )
    cookie = session_cookie(signed)
    async with (
        ChatClient.connect(signed_app.url, headers=cookie) as first,
        ChatClient.connect(signed_app.url, headers=cookie) as second,
    ):
        replies = [await first.send("你好"), await second.send("你好")]  # one at a time: fine
        assert all(r.error is None and r.text for r in replies)
        third = await second.send("再来")  # carol's third message this minute: allowed
        assert third.error is None
        refused = await first.send("还有吗")  # the fourth, from her other chat
        assert refused.error is not None and "3 messages in the last minute" in refused.error
        assert not refused.text
