"""Access: sign-in from a users file or a trusted proxy's header, and per-user limits.

The app tests run the real Chainlit server with sign-in on: a websocket without a
session Chainlit signed is refused; a wrong password fails; the right one gets a session
whose websocket chats.
"""

from __future__ import annotations

import io
import stat
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import jwt
import pytest
import socketio

from chat.limits import WINDOW_S, LimitExceededError, UserLimits
from deploy.loading import load_settings
from deploy.settings import SettingsError
from deploy.users import UserFileError, add_user, remove_user, verify_password
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
    limits = UserLimits(max_replies=2, per_minute=3, max_total=100)
    limits.admit("alice", now=0)
    limits.admit("alice", now=1)
    with pytest.raises(LimitExceededError) as busy:
        limits.admit("alice", now=2)  # refused, and still counted: a message is a message
    assert busy.value.limit == "replies" and busy.value.retry_after_s is None
    limits.admit("bob", now=2)  # one user's limits are not another's
    limits.done("alice")
    with pytest.raises(LimitExceededError) as fast:
        limits.admit("alice", now=3)  # room for a reply, but three messages this minute
    assert fast.value.limit == "per_minute" and fast.value.retry_after_s == WINDOW_S - 3
    limits.done("alice")
    limits.admit("alice", now=WINDOW_S + 2.5)  # the first three left the window


def test_replies_at_once_over_all_users_are_capped_politely() -> None:
    limits = UserLimits(max_replies=2, per_minute=10, max_total=2)
    limits.admit("alice", now=0)
    limits.admit("bob", now=0)
    with pytest.raises(LimitExceededError) as full:
        limits.admit("carol", now=0)
    assert full.value.limit == "busy" and full.value.value == 2
    limits.done("bob")
    limits.admit("carol", now=1)


def test_what_idle_users_held_is_dropped() -> None:
    limits = UserLimits(max_replies=2, per_minute=10, max_total=100)
    for user in range(1000):
        limits.admit(f"address:10.0.{user // 256}.{user % 256}", now=0)
        limits.done(f"address:10.0.{user // 256}.{user % 256}")
    limits.admit("alice", now=WINDOW_S + 1)
    assert len(limits._sent) == 1  # only alice's messages are kept


SECRET = "test-secret-" + "x" * 40
PROXY_SECRET = "proxy-secret-" + "y" * 40
PROXY = {"X-Proxy-Secret": PROXY_SECRET}  # what the trusted proxy adds to every request
PORTAL = "https://portal.example.com"  # another origin the operator allows
OPS_TOKEN = "ops-token-" + "z" * 30


@pytest.fixture(scope="module")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    users = tmp_path_factory.mktemp("access") / "users.txt"
    for name in ("alice", "frank", "gina"):
        add_user(users, name, PASSWORD)
    return users


@pytest.fixture(scope="module")
def signed_app(scripted_model: Path, vllm_server: Server, users_file: Path) -> Iterator[AppServer]:
    """The app with sign-in on, on the remote backend (the session's ``vllm serve``): what
    is tested is the app's doors, not the engine."""
    folder, users = users_file.parent, users_file
    env = {
        "ERNIE_MODEL": str(scripted_model),
        "ERNIE_ENGINE": "remote",
        "ERNIE_REMOTE_URL": vllm_server.url,
        "ERNIE_MAX_MODEL_LEN": "2048",
        "ERNIE_MAX_TOKENS": "64",
        "ERNIE_WARMUP": "false",
        "ERNIE_USERS_FILE": str(users),
        "ERNIE_AUTH_HEADER": "X-Forwarded-User",
        "ERNIE_AUTH_PROXY_SECRET": PROXY_SECRET,
        "ERNIE_AUTH_ALLOW_BOTH": "true",
        "ERNIE_ALLOWED_ORIGINS": PORTAL,
        "ERNIE_OPS_TOKEN": OPS_TOKEN,
        "ERNIE_SESSION_HOURS": "2",
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
    assert httpx.post(header, headers=PROXY, timeout=10).status_code == 401  # no user named
    signed = httpx.post(header, headers={"X-Forwarded-User": "bob"} | PROXY, timeout=10)
    assert signed.status_code == 200
    me = httpx.get(f"{signed_app.url}/user", headers=session_cookie(signed), timeout=10)
    assert me.json()["identifier"] == "bob"


async def test_per_user_limits_answer_politely_and_count_the_user_not_the_chat(
    signed_app: AppServer,
) -> None:
    await wait_ready(signed_app.url, 300)
    signed = httpx.post(
        f"{signed_app.url}/auth/header", headers={"X-Forwarded-User": "carol"} | PROXY, timeout=10
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


@pytest.mark.parametrize(
    "forged",
    [{}, {"X-Proxy-Secret": ""}, {"X-Proxy-Secret": PROXY_SECRET[:-1]}, {"X-Proxy-Secret": "x"}],
)
async def test_a_client_that_reaches_the_port_cannot_name_itself_a_user(
    signed_app: AppServer, forged: dict[str, str]
) -> None:
    """The header alone (as any client can send it) signs no one in: only the proxy's
    secret makes the header count."""
    await wait_ready(signed_app.url, 300)
    answer = httpx.post(
        f"{signed_app.url}/auth/header", headers={"X-Forwarded-User": "alice"} | forged, timeout=10
    )
    assert answer.status_code == 401 and not answer.cookies


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"ERNIE_AUTH_HEADER": "X-User"}, "ERNIE_AUTH_PROXY_SECRET (at least 32"),
        (
            {"ERNIE_AUTH_HEADER": "X-User", "ERNIE_AUTH_PROXY_SECRET": "short"},
            "must prove itself",
        ),
        (
            {"ERNIE_AUTH_HEADER": "X-User", "ERNIE_AUTH_PROXY_SECRET": PROXY_SECRET},
            "keep one, or set ERNIE_AUTH_ALLOW_BOTH=true",
        ),
        ({"CHAINLIT_AUTH_SECRET": "too-short"}, "at least 32 characters; 9 given"),
    ],
)
def test_sign_in_settings_that_would_open_a_door_stop_the_app(
    env: dict[str, str], words: str, users_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHAINLIT_AUTH_SECRET", SECRET)
    monkeypatch.setenv("ERNIE_USERS_FILE", str(users_file))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert words in str(refused.value) and "\n" not in str(refused.value)
    assert PROXY_SECRET not in str(refused.value)


async def test_an_origin_the_operator_allows_may_use_the_chat(signed_app: AppServer) -> None:
    await wait_ready(signed_app.url, 300)
    preflight = httpx.options(
        f"{signed_app.url}/user",
        headers={"Origin": PORTAL, "Access-Control-Request-Method": "GET"},
        timeout=10,
    )
    assert preflight.headers.get("access-control-allow-origin") == PORTAL
    signed = httpx.post(
        f"{signed_app.url}/auth/header", headers={"X-Forwarded-User": "dave"} | PROXY, timeout=10
    )
    cookie = session_cookie(signed) | {"Origin": PORTAL}
    async with ChatClient.connect(signed_app.url, headers=cookie) as chat:
        assert (await chat.send("你好")).error is None


async def test_the_operations_endpoints_tell_the_details_only_to_the_token(
    signed_app: AppServer,
) -> None:
    await wait_ready(signed_app.url, 300)
    bearer = {"Authorization": f"Bearer {OPS_TOKEN}"}
    assert httpx.get(f"{signed_app.url}/metrics", timeout=10).status_code == 401
    wrong = {"Authorization": f"Bearer {OPS_TOKEN}x"}
    assert httpx.get(f"{signed_app.url}/metrics", headers=wrong, timeout=10).status_code == 401
    metrics = httpx.get(f"{signed_app.url}/metrics", headers=bearer, timeout=10)
    assert metrics.status_code == 200 and "ernie_messages_total" in metrics.text
    open_ready = httpx.get(f"{signed_app.url}/readyz", timeout=10)
    assert open_ready.status_code == 200 and open_ready.json() == {"state": "ready"}
    detail = httpx.get(f"{signed_app.url}/readyz", headers=bearer, timeout=10).json()
    assert detail["capacity"]["backend"] == "remote"


def login(url: str, name: str, password: str, address: str) -> tuple[int, float]:
    """A password sign-in from ``address`` (as the trusted proxy forwards it): its status
    and how long the server took."""
    headers = PROXY | {"X-Forwarded-For": address}
    started = time.monotonic()
    answer = httpx.post(
        f"{url}/login", data={"username": name, "password": password}, headers=headers, timeout=30
    )
    return answer.status_code, time.monotonic() - started


async def test_an_unknown_name_takes_as_long_as_a_known_one(signed_app: AppServer) -> None:
    """Names cannot be told from the answer's time (they were: 0.2 ms against 40 ms)."""
    await wait_ready(signed_app.url, 300)
    known = [login(signed_app.url, "alice", "wrong password", "10.1.0.1") for _ in range(3)]
    unknown = [login(signed_app.url, "nobody", "wrong password", "10.1.0.2") for _ in range(3)]
    assert {code for code, _ in known + unknown} == {401}
    ratio = statistics.median(t for _, t in unknown) / statistics.median(t for _, t in known)
    assert 0.5 < ratio < 2, (known, unknown)


async def test_sign_in_attempts_are_limited_per_name_and_per_address(
    signed_app: AppServer,
) -> None:
    url = signed_app.url
    await wait_ready(url, 300)
    for attempt in range(10):  # guessing frank's password from many addresses
        assert login(url, "frank", f"guess {attempt}", f"10.2.0.{attempt}")[0] == 401
    assert login(url, "frank", PASSWORD, "10.2.0.99")[0] == 401  # frank's name is locked
    assert login(url, "alice", PASSWORD, "10.2.0.99")[0] == 200  # others are not
    for attempt in range(10):  # guessing many names from one address
        assert login(url, f"user{attempt}", "guess", "10.3.0.1")[0] == 401
    assert login(url, "alice", PASSWORD, "10.3.0.1")[0] == 401  # that address is locked
    assert login(url, "alice", PASSWORD, "10.3.0.2")[0] == 200


async def test_a_session_lasts_hours_and_ends_when_its_user_is_removed(
    signed_app: AppServer, users_file: Path
) -> None:
    url = signed_app.url
    await wait_ready(url, 300)
    right = httpx.post(f"{url}/login", data={"username": "gina", "password": PASSWORD})
    cookie = session_cookie(right)
    claims = jwt.decode(
        right.cookies["access_token"], options={"verify_signature": False}, algorithms=["HS256"]
    )
    assert claims["exp"] - claims["iat"] == 2 * 3600  # ERNIE_SESSION_HOURS, not 15 days
    async with ChatClient.connect(url, headers=cookie) as chat:
        assert (await chat.send("你好")).error is None
    assert remove_user(users_file, "gina")
    assert httpx.get(f"{url}/user", headers=cookie, timeout=10).status_code == 401
    with pytest.raises(socketio.exceptions.ConnectionError):
        async with ChatClient.connect(url, headers=cookie):
            pass
