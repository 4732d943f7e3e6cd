"""Sign-in as an attacker tries it, on the real app with sign-in on: one process
(``signed_app``) and two workers behind the group's HAProxy (``signed_group``). Guesses
sent at once are each counted before they are checked, over the whole group; a burst
cannot fill the server with password checks; a signed-out token stops working; a client
cannot add its own copy of the proxy's user header."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from testing.accounts import PASSWORD, PROXY, named, try_password
from testing.accounts import session_cookie as cookie_of
from testing.servers import AppServer
from testing.visitors import http_client, visitor

GUESSES = 39  # wrong ones, sent with the right one in one burst


async def burst(url: str, name: str, address: str) -> list[int]:
    """``GUESSES`` wrong passwords and then the right one, all at once; their answers."""
    tries = [try_password(url, name, f"guess {n}", address) for n in range(GUESSES)]
    tries.append(try_password(url, name, PASSWORD, address))
    return list(await asyncio.gather(*tries))


@pytest.mark.engine  # the apps on the session's vllm serve, named by parameter
@pytest.mark.parametrize("app_name", ["signed_app", "signed_group"])
async def test_guesses_sent_at_once_are_each_counted_before_they_are_checked(
    request: pytest.FixtureRequest, app_name: str
) -> None:
    """39 wrong guesses and the right password in one burst from one address: the right
    one signed in (each guess was checked against the failures before it, and none had
    failed yet); with two workers each counted its own ten."""
    app: AppServer = request.getfixturevalue(app_name)
    codes = await burst(app.url, "henry", visitor())
    assert codes[-1] != 200, "the right password, sent after 39 wrong ones, signed in"
    assert set(codes) <= {401, 429}


async def test_guesses_one_by_one_over_the_workers_share_one_count(
    signed_group: AppServer,
) -> None:
    """Through HAProxy the tries of one address spread over the workers; the lock after
    ten failures holds for the group, not for each worker."""
    address = visitor()
    for n in range(12):
        assert await try_password(signed_group.url, "ivy", f"guess {n}", address) == 401
    assert await try_password(signed_group.url, "ivy", PASSWORD, address) == 401  # locked
    assert await try_password(signed_group.url, "ivy", PASSWORD, visitor()) == 200  # she is not


async def test_a_burst_from_many_addresses_cannot_fill_the_server(signed_app: AppServer) -> None:
    """40 tries from 40 addresses ran 40 password checks at once (128 MiB each: RSS 0.9 to
    1.6 GB), and another user's request waited 8 s behind them. Ten at most are checked or
    wait; the rest are answered 429 at once, and the server goes on."""
    url = signed_app.url
    started = time.monotonic()
    codes = await asyncio.gather(
        *(try_password(url, f"ghost{n}", "guess", visitor()) for n in range(40))
    )
    assert codes.count(429) >= 20, codes
    assert set(codes) <= {401, 429}
    with http_client(visitor()) as http:
        assert http.get(f"{url}/healthz").status_code == 200
    assert time.monotonic() - started < 60


def test_a_signed_out_token_stops_working(signed_app: AppServer) -> None:
    """A token copied before ``POST /logout`` worked on until its session's hours ended."""
    url = signed_app.url
    with http_client(visitor()) as http:
        signed = http.post(f"{url}/login", data={"username": "alice", "password": PASSWORD})
    assert signed.status_code == 200
    cookie, held = cookie_of(signed), signed.cookies["access_token"]
    assert httpx.get(f"{url}/user", headers=cookie, timeout=10).status_code == 200
    out = httpx.post(f"{url}/logout", headers=cookie, timeout=10)
    assert out.status_code == 200
    assert httpx.get(f"{url}/user", headers=cookie, timeout=10).status_code == 401
    bearer = {"Authorization": f"Bearer {held}"}
    assert httpx.post(f"{url}/auth/jwt", headers=bearer, timeout=10).status_code == 401
    with http_client(visitor()) as http:  # a new sign-in is a new session
        again = http.post(f"{url}/login", data={"username": "alice", "password": PASSWORD})
    assert httpx.get(f"{url}/user", headers=cookie_of(again), timeout=10).status_code == 200


def test_a_second_copy_of_the_proxys_user_header_names_no_one(signed_app: AppServer) -> None:
    """``User: admin``, the proxy's secret, then the proxy's own ``User: alice``: the first
    copy was read, and the client signed in as admin."""
    headers = [("X-Forwarded-User", "admin"), *PROXY.items(), ("X-Forwarded-User", "alice")]
    with http_client(visitor()) as http:
        doubled = http.post(f"{signed_app.url}/auth/header", headers=headers)
        secrets = http.post(
            f"{signed_app.url}/auth/header", headers=[*named("bob").items(), *PROXY.items()] * 2
        )
        single = http.post(f"{signed_app.url}/auth/header", headers=named("alice") | PROXY)
    assert doubled.status_code == 401 and not doubled.cookies
    assert secrets.status_code == 401
    assert single.status_code == 200
