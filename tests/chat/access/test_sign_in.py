"""Sign-in from a users file or a trusted proxy's header, on the real app with sign-in on
(``signed_app``): a websocket without a session Chainlit signed is refused; a wrong
password fails; the right one gets a session whose websocket chats. Guessing is slowed
and locked per address, never for the user; a session ends hours after the sign-in
itself, renewed or not.
"""

from __future__ import annotations

import io
import stat
import statistics
import time
from pathlib import Path

import httpx
import jwt
import pytest
import socketio

from chat.__main__ import main
from chat.access.users import UserFileError, add_user, remove_user, verify_password
from settings.loader import load_settings
from settings.settings import SettingsError
from testing.accounts import AUTH_SECRET, PASSWORD, PROXY, PROXY_SECRET, forwarded, named
from testing.accounts import session_cookie as cookie_of
from testing.chat_client import ChatClient
from testing.servers import AppServer
from testing.visitors import http_client, visitor


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
    monkeypatch.setenv("CHAINLIT_AUTH_SECRET", AUTH_SECRET)
    monkeypatch.setenv("ERNIE_USERS_FILE", str(users_file))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert words in str(refused.value) and "\n" not in str(refused.value)
    assert PROXY_SECRET not in str(refused.value)


def login(url: str, name: str, password: str, address: str) -> tuple[int, float]:
    """A password sign-in of a visitor at ``address`` (as the trusted proxy names it): its
    status and how long the server took."""
    started = time.monotonic()
    with http_client(visitor()) as http:
        answer = http.post(
            f"{url}/login", data={"username": name, "password": password},
            headers=forwarded(address), timeout=30,
        )  # fmt: skip
    return answer.status_code, time.monotonic() - started


def signed_in(url: str, name: str) -> dict[str, str]:
    """A password sign-in from an address of its own; its session cookie."""
    with http_client(visitor()) as http:
        answer = http.post(f"{url}/login", data={"username": name, "password": PASSWORD})
    assert answer.status_code == 200, answer.text
    return cookie_of(answer)


async def test_without_a_session_the_websocket_and_the_api_are_refused(
    signed_app: AppServer,
) -> None:
    with pytest.raises(socketio.exceptions.ConnectionError):
        async with ChatClient.connect(signed_app.url, source=visitor()):
            pass
    forged = {"Cookie": "access_token=" + "e30.e30.forged"}
    with pytest.raises(socketio.exceptions.ConnectionError):
        async with ChatClient.connect(signed_app.url, headers=forged, source=visitor()):
            pass
    assert httpx.get(f"{signed_app.url}/user", timeout=10).status_code == 401


async def test_a_wrong_password_fails_and_the_right_one_chats(signed_app: AppServer) -> None:
    url = signed_app.url
    assert login(url, "alice", "wrong!", visitor())[0] == 401
    assert login(url, "mallory", PASSWORD, visitor())[0] == 401
    cookie = signed_in(url, "alice")
    me = httpx.get(f"{url}/user", headers=cookie, timeout=10)
    assert me.json()["identifier"] == "alice"
    async with ChatClient.connect(url, headers=cookie, source=visitor()) as chat:
        reply = await chat.send("你好")
    assert reply.error is None and reply.text


async def test_a_trusted_proxy_header_signs_in(signed_app: AppServer) -> None:
    header = f"{signed_app.url}/auth/header"
    assert httpx.post(header, headers=PROXY, timeout=10).status_code == 401  # no user named
    signed = httpx.post(header, headers=named("bob") | PROXY, timeout=10)
    assert signed.status_code == 200
    me = httpx.get(f"{signed_app.url}/user", headers=cookie_of(signed), timeout=10)
    assert me.json()["identifier"] == "bob"


@pytest.mark.parametrize(
    "forged",
    [
        {},
        {"X-Proxy-Secret": ""},
        {"X-Proxy-Secret": PROXY_SECRET[:-1]},
        {"X-Proxy-Secret": "x"},
        {"X_Proxy_Secret": PROXY_SECRET[:-1]},
    ],
)
async def test_a_client_that_reaches_the_port_cannot_name_itself_a_user(
    signed_app: AppServer, forged: dict[str, str]
) -> None:
    """The header alone (as any client can send it) signs no one in: only the proxy's
    secret makes the header count."""
    answer = httpx.post(
        f"{signed_app.url}/auth/header", headers=named("alice") | forged, timeout=10
    )
    assert answer.status_code == 401 and not answer.cookies


async def test_an_unknown_name_takes_as_long_as_a_known_one(signed_app: AppServer) -> None:
    """Names cannot be told from the answer's time (they were: 0.2 ms against 40 ms). The
    two names take turns, so a load that comes or goes on a busy machine weighs on both."""
    known: list[tuple[int, float]] = []
    unknown: list[tuple[int, float]] = []
    for _ in range(5):
        known.append(login(signed_app.url, "henry", "wrong password", visitor()))
        unknown.append(login(signed_app.url, "nobody", "wrong password", visitor()))
    assert {code for code, _ in known + unknown} == {401}
    ratio = statistics.median(t for _, t in unknown) / statistics.median(t for _, t in known)
    assert 0.5 < ratio < 2, (known, unknown)


async def test_guessing_is_locked_per_address_and_slowed_but_no_one_is_locked_out(
    signed_app: AppServer,
) -> None:
    """Ten failures lock an address out (for that name, or for every name it tried many
    of); ten failures of a name from everywhere only slow it: its owner still signs in
    (anyone could lock an account: ten guesses from any addresses locked the right
    password out for five minutes)."""
    url = signed_app.url
    for attempt in range(10):  # guessing frank's password from many addresses
        assert login(url, "frank", f"guess {attempt}", visitor())[0] == 401
    code, took = login(url, "frank", PASSWORD, visitor())
    assert code == 200 and took >= 1.0  # slowed by a second, not locked
    guesser = visitor()
    for attempt in range(10):  # guessing gina's password from one address
        assert login(url, "gina", f"guess {attempt}", guesser)[0] == 401
    assert login(url, "gina", PASSWORD, guesser)[0] == 401  # locked there
    assert login(url, "gina", PASSWORD, visitor())[0] == 200  # she is not
    many = visitor()
    for attempt in range(10):  # guessing many names from one address
        assert login(url, f"user{attempt}", "guess", many)[0] == 401
    assert login(url, "alice", PASSWORD, many)[0] == 401  # that address is locked
    assert login(url, "alice", PASSWORD, visitor())[0] == 200


async def test_a_local_client_cannot_name_its_own_address_to_dodge_the_lock(
    signed_app: AppServer,
) -> None:
    """uvicorn took ``X-Forwarded-For`` from any client on 127.0.0.1 (HAProxy's address
    to its workers, and any local program's) as the visitor's address: each guess came
    from a new one. Only the proxy with the secret names addresses now. (127.0.0.1 stays
    locked for password sign-ins to this app for five minutes: no other test signs in
    from it.)"""
    url = signed_app.url
    with httpx.Client(timeout=30) as local:  # from 127.0.0.1
        for attempt in range(10):
            own = {"X-Forwarded-For": f"10.9.0.{attempt}"}
            data = {"username": f"someone{attempt}", "password": "guess"}
            assert local.post(f"{url}/login", data=data, headers=own).status_code == 401
        data = {"username": "ivy", "password": PASSWORD}
        again = local.post(f"{url}/login", data=data, headers={"X-Forwarded-For": "10.9.0.99"})
    assert again.status_code == 401  # the address it really has is locked
    assert login(url, "ivy", PASSWORD, visitor())[0] == 200


def token(user: str, provider: str, signed_in_s_ago: float) -> str:
    """A session token as the app issues them, for a sign-in ``signed_in_s_ago``: what a
    client holds after renewing it again and again."""
    now = time.time()
    claims = {
        "identifier": user,
        "display_name": None,
        "metadata": {"provider": provider, "signed_in_at": now - signed_in_s_ago},
        "iat": int(now - 60),
        "exp": int(now + 3600),
    }
    return jwt.encode(claims, AUTH_SECRET, algorithm="HS256")


def renew(url: str, held: str, headers: dict[str, str] | None = None) -> httpx.Response:
    """Chainlit's token renewal: a valid token buys a new one."""
    bearer = {"Authorization": f"Bearer {held}"} | (headers or {})
    return httpx.post(f"{url}/auth/jwt", headers=bearer, timeout=10)


async def test_a_session_ends_hours_after_the_sign_in_however_often_renewed(
    signed_app: AppServer,
) -> None:
    """ERNIE_SESSION_HOURS=2 from the sign-in itself: a token renewed past that is refused,
    and so is its renewal (a 12-hour token renewed forever never ended)."""
    url = signed_app.url
    with http_client(visitor()) as http:
        fresh = http.post(f"{url}/login", data={"username": "henry", "password": PASSWORD})
    renewed = renew(url, fresh.cookies["access_token"])
    assert renewed.status_code == 200  # a fresh session renews
    kept = jwt.decode(renewed.cookies["access_token"], AUTH_SECRET, algorithms=["HS256"])
    first = jwt.decode(fresh.cookies["access_token"], AUTH_SECRET, algorithms=["HS256"])
    assert kept["metadata"]["signed_in_at"] == first["metadata"]["signed_in_at"]
    stale = token("henry", "password", signed_in_s_ago=3 * 3600)
    assert renew(url, stale).status_code == 401
    cookie = {"Cookie": f"access_token={stale}"}
    assert httpx.get(f"{url}/user", headers=cookie, timeout=10).status_code == 401
    with pytest.raises(socketio.exceptions.ConnectionError):
        async with ChatClient.connect(url, headers=cookie, source=visitor()):
            pass


async def test_a_header_users_renewal_needs_the_proxy_to_name_them_again(
    signed_app: AppServer,
) -> None:
    url = signed_app.url
    held = token("bob", "header", signed_in_s_ago=60)
    assert renew(url, held).status_code == 401  # the proxy did not ask for it
    assert renew(url, held, PROXY | named("mallory")).status_code == 401  # another user
    assert renew(url, held, PROXY | named("bob")).status_code == 200


async def test_a_session_lasts_hours_and_ends_when_its_user_is_removed(
    signed_app: AppServer, users_file: Path
) -> None:
    url = signed_app.url
    with http_client(visitor()) as http:
        right = http.post(f"{url}/login", data={"username": "gina", "password": PASSWORD})
    cookie = cookie_of(right)
    claims = jwt.decode(
        right.cookies["access_token"], options={"verify_signature": False}, algorithms=["HS256"]
    )
    assert claims["exp"] - claims["iat"] == 2 * 3600  # ERNIE_SESSION_HOURS, not 15 days
    async with ChatClient.connect(url, headers=cookie, source=visitor()) as chat:
        assert (await chat.send("你好")).error is None
    assert remove_user(users_file, "gina")
    try:
        assert httpx.get(f"{url}/user", headers=cookie, timeout=10).status_code == 401
        assert renew(url, right.cookies["access_token"]).status_code == 401  # nor renewed
        with pytest.raises(socketio.exceptions.ConnectionError):
            async with ChatClient.connect(url, headers=cookie, source=visitor()):
                pass
    finally:
        add_user(users_file, "gina", PASSWORD)  # the session's other tests may sign her in
