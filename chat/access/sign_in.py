"""Sign-in, when the settings turn it on: from the users file, or a trusted proxy's header.

Chainlit then refuses pages and websockets without a session it signed
(``CHAINLIT_AUTH_SECRET``). The users file's format and hashing are ``deploy.users``; a
proxy's header counts only with the proxy's shared secret (``deploy.access``).

A session lasts ``ERNIE_SESSION_HOURS`` from the sign-in itself: the time is kept in the
token (``SIGNED_IN``), so renewing a token (Chainlit's ``POST /auth/jwt``) keeps it, and
every token issued is for a user who may sign in now (still in the users file, or named
by the proxy again).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import chainlit as cl
import chainlit.auth as chainlit_auth
import chainlit.server as chainlit_server
import jwt
from chainlit.auth.jwt import get_jwt_secret
from chainlit.config import config
from fastapi import HTTPException, Request

from deploy.settings import Settings
from deploy.users import is_user, verify_password

from .limits import SignInAttempts
from .peers import CLIENT_ADDRESS, REQUEST_USER

__all__ = ["SIGNED_IN", "register"]

logger = logging.getLogger(__name__)

SIGNED_IN = "signed_in_at"  # the user's metadata: when they signed in (Unix time)


def register(settings: Settings) -> bool:
    """Register the sign-in callbacks the settings ask for; whether sign-in is on."""
    lifetime_s = settings.session_hours * 3600
    config.project.user_session_timeout = int(lifetime_s)
    if settings.users_file is not None:
        _register_password(settings.users_file)
    proxy: tuple[str, str, bytes] | None = None
    if settings.auth_header is not None and settings.auth_proxy_secret is not None:
        secret = settings.auth_proxy_secret.get_secret_value().encode()
        proxy = (settings.auth_header, settings.auth_proxy_secret_header, secret)
        _register_header(*proxy)
    _check_sessions(Validity(settings.users_file, proxy, lifetime_s))
    return settings.signs_in


def _user(name: str, provider: str) -> cl.User:
    return cl.User(identifier=name, metadata={"provider": provider, SIGNED_IN: time.time()})


def _register_password(users_file: Path) -> None:
    attempts = SignInAttempts()

    @cl.password_auth_callback
    async def sign_in(name: str, password: str) -> cl.User | None:
        """A user of the users file with the right password (scrypt: off the loop), unless
        this address failed too often lately; a name guessed from everywhere waits."""
        address = CLIENT_ADDRESS.get()
        if attempts.blocked(name, address, now=time.monotonic()):
            logger.warning("sign-in refused for %r: too many failures from %s", name, address)
            return None
        await asyncio.sleep(attempts.delay_s(name, now=time.monotonic()))
        if await asyncio.to_thread(verify_password, users_file, name, password):
            return _user(name, "password")
        attempts.failed(name, address, now=time.monotonic())
        logger.warning("sign-in refused for %r from %s", name, address)
        return None


def _proxy_names(headers: Mapping[str, str], proxy: tuple[str, str, bytes]) -> str | None:
    """The user the proxy names, once it proved itself with the shared secret (compared
    in constant time; the proxy must drop the clients' own copies of both headers)."""
    header, secret_header, secret = proxy
    if not hmac.compare_digest(headers.get(secret_header, "").encode(), secret):
        return None
    return headers.get(header) or None


def _register_header(header: str, secret_header: str, secret: bytes) -> None:
    @cl.header_auth_callback
    async def sign_in_from_proxy(headers: Mapping[str, str]) -> cl.User | None:
        name = _proxy_names(headers, (header, secret_header, secret))
        if name is None:
            logger.warning("header sign-in refused: no user, or the proxy's secret is wrong")
            return None
        return _user(name, "header")


class Validity:
    """Whether a session's user may still be signed in."""

    def __init__(
        self, users_file: Path | None, proxy: tuple[str, str, bytes] | None, lifetime_s: float
    ) -> None:
        self.users_file = users_file
        self.proxy = proxy
        self.lifetime_s = lifetime_s

    def expired(self, signed_in_at: float) -> bool:
        return time.time() - signed_in_at > self.lifetime_s

    async def member(self, user: Any) -> bool:
        """A password user still in the users file (a proxy's users are the proxy's)."""
        if self.users_file is None or _provider(user) != "password":
            return True
        return await asyncio.to_thread(is_user, self.users_file, user.identifier)

    def named_again(self, request: Request, user: Any) -> bool:
        """A header user: the proxy names the same user on this request."""
        if _provider(user) != "header":
            return True
        return self.proxy is not None and _proxy_names(request.headers, self.proxy) == (
            user.identifier
        )


def _provider(user: Any) -> str | None:
    return (getattr(user, "metadata", None) or {}).get("provider")


def _signed_in_at(token: str) -> float:
    """When the token's user signed in (a token from before this was kept: when issued)."""
    claims = jwt.decode(token, get_jwt_secret() or "", algorithms=["HS256"])
    return float((claims.get("metadata") or {}).get(SIGNED_IN, claims.get("iat", 0)))


def _check_sessions(validity: Validity) -> None:
    """Every request's session and every token issued, checked once more than Chainlit
    does: within the lifetime from the sign-in, and for a user who may still sign in.
    The user is noted for the history's owner checks (``REQUEST_USER``)."""
    original = chainlit_auth.authenticate_user
    if getattr(original, "_checks_validity", False):
        return

    async def authenticate_valid(token: str) -> Any:
        user = await original(token)
        if validity.expired(_signed_in_at(token)) or not await validity.member(user):
            logger.warning("session of %r refused: ended or no longer a user", user.identifier)
            raise HTTPException(status_code=401, detail="this session has ended: sign in again")
        REQUEST_USER.set(user.identifier)
        return user

    issue = chainlit_server._authenticate_user

    async def issue_valid(request: Request, user: Any, *args: Any, **kwargs: Any) -> Any:
        if user is not None:
            signed_in_at = float((user.metadata or {}).get(SIGNED_IN, 0))
            fresh = not validity.expired(signed_in_at) and validity.named_again(request, user)
            if not fresh or not await validity.member(user):
                logger.warning("token for %r not renewed: sign in again", user.identifier)
                raise HTTPException(status_code=401, detail="this session has ended")
        return await issue(request, user, *args, **kwargs)

    authenticate_valid._checks_validity = True  # type: ignore[attr-defined]
    # Chainlit's get_current_user (HTTP routes and the websocket) calls it by this name,
    # and every sign-in route (password, header, token renewal) issues through the other.
    chainlit_auth.authenticate_user = authenticate_valid  # type: ignore[assignment]
    chainlit_server._authenticate_user = issue_valid
