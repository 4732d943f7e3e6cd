"""The secrets and accounts the test apps are started with, and how a client uses them.

Usage::

    env = SIGNED_ENV | {"ERNIE_USERS_FILE": str(users)}
    cookie = session_cookie(httpx.post(f"{url}/auth/header", headers=PROXY | named("bob")))
"""

from __future__ import annotations

from typing import Any

import httpx

from .visitors import async_http_client, visitor

__all__ = [
    "AUTH_SECRET",
    "OPS_TOKEN",
    "PASSWORD",
    "PORTAL",
    "PROXY",
    "PROXY_SECRET",
    "SIGNED_ENV",
    "forwarded",
    "header_sign_in",
    "listed_chats",
    "listed_threads",
    "named",
    "session_cookie",
    "sign_in",
    "try_password",
]

PASSWORD = "correct horse battery"
AUTH_SECRET = "test-secret-" + "x" * 40  # CHAINLIT_AUTH_SECRET: signs the sessions
PROXY_SECRET = "proxy-secret-" + "y" * 40
PROXY = {"X-Proxy-Secret": PROXY_SECRET}  # what the trusted proxy adds to every request
PORTAL = "https://portal.example.com"  # another origin the operator allows
OPS_TOKEN = "ops-token-" + "z" * 30
# Sign-in from a users file and from a trusted proxy's header, history, limits.
SIGNED_ENV = {
    "ERNIE_AUTH_HEADER": "X-Forwarded-User",
    "ERNIE_AUTH_PROXY_SECRET": PROXY_SECRET,
    "ERNIE_AUTH_ALLOW_BOTH": "true",
    "ERNIE_ALLOWED_ORIGINS": PORTAL,
    "ERNIE_OPS_TOKEN": OPS_TOKEN,
    "ERNIE_SESSION_HOURS": "2",
    "ERNIE_USER_MAX_REPLIES": "1",
    "ERNIE_USER_MESSAGES_PER_MINUTE": "3",
    "CHAINLIT_AUTH_SECRET": AUTH_SECRET,
}


def named(user: str) -> dict[str, str]:
    """The header the trusted proxy names its signed-in user in."""
    return {"X-Forwarded-User": user}


def forwarded(address: str) -> dict[str, str]:
    """What the trusted proxy says of a visitor from ``address``: the secret and the
    address."""
    return PROXY | {"X-Forwarded-For": address}


def session_cookie(response: httpx.Response) -> dict[str, str]:
    """The session a sign-in answered with, as headers for the next requests."""
    cookies = "; ".join(f"{name}={value}" for name, value in response.cookies.items())
    assert cookies, response.headers
    return {"Cookie": cookies}


def sign_in(url: str, name: str, password: str) -> dict[str, str]:
    """The session cookie of a password sign-in, as headers for the next requests."""
    response = httpx.post(f"{url}/login", data={"username": name, "password": password})
    assert response.status_code == 200, response.text
    return session_cookie(response)


def header_sign_in(url: str, name: str) -> dict[str, str]:
    """The session cookie of ``name``, signed in by the trusted proxy's header."""
    return session_cookie(httpx.post(f"{url}/auth/header", headers=named(name) | PROXY))


async def try_password(url: str, name: str, password: str, address: str) -> int:
    """One sign-in try of a visitor at ``address`` (as the trusted proxy names it), on a
    connection of its own (HAProxy picks a worker for each); its status code."""
    async with async_http_client(visitor()) as http:
        form = {"username": name, "password": password}
        answer = await http.post(f"{url}/login", data=form, headers=forwarded(address), timeout=60)
        return answer.status_code


def listed_threads(url: str, cookie: dict[str, str]) -> list[dict[str, Any]]:
    """The chats the sidebar lists for the signed-in user, with their messages."""
    body = {"pagination": {"first": 20}, "filter": {}}
    response = httpx.post(f"{url}/project/threads", json=body, headers=cookie, timeout=10)
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


def listed_chats(url: str, cookie: dict[str, str]) -> list[str]:
    """The ids of the chats the sidebar lists for the signed-in user."""
    return [thread["id"] for thread in listed_threads(url, cookie)]
