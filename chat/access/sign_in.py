"""Sign-in, when the settings turn it on: from the users file, or a trusted proxy's header.

Chainlit then refuses pages and websockets without a session it signed
(``CHAINLIT_AUTH_SECRET``). The users file's format and hashing are ``chat.access.users``; a
proxy's header counts only with the proxy's shared secret (``settings.visitors``).

A session lasts ``ERNIE_SESSION_HOURS`` from the sign-in itself: the time is kept in the
token (``SIGNED_IN``), so renewing a token (Chainlit's ``POST /auth/jwt``) keeps it, and
every token issued is for a user who may sign in now (still in the users file, or named
by the proxy again) and did not sign out of that sign-in (``POST /logout`` ends it: a copy
of its token stops working too).

Guessing: a try counts as a failure from the moment it arrives (``SignInAttempts.begin``),
so tries sent at once are all counted, in the app's one store (``chat.counts``: a group's
or the replicas' count is theirs together). Passwords are checked on a pool of their own, at most
``CHECKS_RUNNING`` at once and ``CHECKS_WAITING`` waiting (scrypt takes 128 MiB and a
third of a second each): past that a sign-in is answered 429 at once, and no burst fills
the loop's default executor, on which the app's other work waits.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import chainlit as cl
import jwt
from fastapi import HTTPException, Request, Response
from starlette.datastructures import Headers

from chat.access.users import is_user, verify_password
from settings.settings import Settings

from ..chainlit_door import check_sign_ins, config, get_jwt_secret, get_token_from_cookies
from ..counts import Store
from . import oidc
from .limits import SignInAttempts, SignOuts
from .peers import CLIENT_ADDRESS, REQUEST_USER

__all__ = ["CHECKS_RUNNING", "CHECKS_WAITING", "SIGNED_IN", "register"]

logger = logging.getLogger(__name__)

AsyncFunction = Callable[..., Awaitable[Any]]

SIGNED_IN = "signed_in_at"  # the user's metadata: when they signed in (Unix time)
CHECKS_RUNNING, CHECKS_WAITING = 2, 8  # password checks at once, and waiting for one
# This request's sign-in was refused for want of a free check (Chainlit's callback wrapper
# swallows exceptions: the route's answer reads this instead).
CHECKS_FULL: ContextVar[bool] = ContextVar("sign_in_checks_full", default=False)


class PasswordChecks:
    """The users file's password checks on a pool of their own, with a bounded queue."""

    def __init__(self, users_file: Path) -> None:
        self.users_file = users_file
        self._pool = ThreadPoolExecutor(CHECKS_RUNNING, thread_name_prefix="password-check")
        self._in_flight = 0

    async def verify(self, name: str, password: str) -> bool | None:
        """Whether the password is right; None: no check free (nothing was checked)."""
        if self._in_flight >= CHECKS_RUNNING + CHECKS_WAITING:
            return None
        self._in_flight += 1
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                self._pool, verify_password, self.users_file, name, password
            )
        finally:
            self._in_flight -= 1


def register(settings: Settings, store: Store) -> bool:
    """Register the sign-in callbacks the settings ask for; whether sign-in is on.
    ``store``: where tries and sign-outs are counted."""
    lifetime_s = settings.session_hours * 3600
    config.project.user_session_timeout = int(lifetime_s)
    attempts, sign_outs = SignInAttempts(store), SignOuts(store)
    if settings.users_file is not None:
        _register_password(PasswordChecks(settings.users_file), attempts)
    oidc.register(settings, _user)
    proxy: tuple[str, str, bytes] | None = None
    if settings.auth_header is not None and settings.auth_proxy_secret is not None:
        secret = settings.auth_proxy_secret.get_secret_value().encode()
        proxy = (settings.auth_header, settings.auth_proxy_secret_header, secret)
        _register_header(*proxy)
    if settings.signs_in:
        _register_sign_out(sign_outs)
    _check_sessions(Validity(settings.users_file, proxy, lifetime_s, sign_outs))
    return settings.signs_in


def _user(name: str, provider: str) -> cl.User:
    return cl.User(identifier=name, metadata={"provider": provider, SIGNED_IN: time.time()})


def _register_password(checks: PasswordChecks, attempts: SignInAttempts) -> None:
    @cl.password_auth_callback
    async def sign_in(name: str, password: str) -> cl.User | None:
        """A user of the users file with the right password, unless this address failed
        too often lately (the try counted before it is checked); a name guessed from
        everywhere waits first."""
        address = CLIENT_ADDRESS.get()
        if not await attempts.begin(name, address):
            logger.warning("sign-in refused for %r: too many failures from %s", name, address)
            return None
        await asyncio.sleep(await attempts.delay_s(name))
        right = await checks.verify(name, password)
        if right is None:
            logger.warning("sign-in refused for %r from %s: every check is busy", name, address)
            CHECKS_FULL.set(True)
            return None
        if right:
            await attempts.succeeded(name, address)
            return _user(name, "password")
        logger.warning("sign-in refused for %r from %s", name, address)
        return None


def _register_sign_out(sign_outs: SignOuts) -> None:
    @cl.on_logout
    async def sign_out(request: Request, response: Response) -> dict[str, bool]:
        """The sign-in of the token this browser holds ends: its copies stop working."""
        token = get_token_from_cookies(dict(request.cookies))
        try:
            claims = _claims(token) if token else None
        except jwt.InvalidTokenError:
            claims = None  # nothing this app signed: nothing to end
        if claims is not None:
            user, at = str(claims.get("identifier")), _signed_in_of(claims)
            await sign_outs.sign_out(user, at, until=float(claims.get("exp", 0)), now=time.time())
            logger.info("%r signed out", user)
        return {"success": True}


def _proxy_names(headers: Headers, proxy: tuple[str, str, bytes]) -> str | None:
    """The user the proxy names, once it proved itself with the shared secret (compared
    in constant time; the proxy must drop the clients' own copies of both headers). A
    request with either header more than once names no one: a client's own copy beside
    the proxy's would be read first."""
    header, secret_header, secret = proxy
    secrets_given, names = headers.getlist(secret_header), headers.getlist(header)
    if len(secrets_given) != 1 or len(names) != 1:
        return None
    if not hmac.compare_digest(secrets_given[0].encode(), secret):
        return None
    return names[0] or None


def _register_header(header: str, secret_header: str, secret: bytes) -> None:
    @cl.header_auth_callback
    async def sign_in_from_proxy(headers: Headers) -> cl.User | None:
        name = _proxy_names(headers, (header, secret_header, secret))
        if name is None:
            logger.warning("header sign-in refused: no user, or the proxy's secret is wrong")
            return None
        return _user(name, "header")


class Validity:
    """Whether a session's user may still be signed in."""

    def __init__(
        self,
        users_file: Path | None,
        proxy: tuple[str, str, bytes] | None,
        lifetime_s: float,
        sign_outs: SignOuts,
    ) -> None:
        self.users_file = users_file
        self.proxy = proxy
        self.lifetime_s = lifetime_s
        self.sign_outs = sign_outs

    async def ended(self, user: str, signed_in_at: float) -> bool:
        """Past the lifetime from the sign-in, or signed out of."""
        expired = time.time() - signed_in_at > self.lifetime_s
        return expired or await self.sign_outs.signed_out(user, signed_in_at)

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


def _claims(token: str) -> dict[str, Any]:
    """A token's claims, its signature checked (``jwt.InvalidTokenError`` if it is none
    of this app's)."""
    return dict(jwt.decode(token, get_jwt_secret() or "", algorithms=["HS256"]))


def _signed_in_of(claims: dict[str, Any]) -> float:
    """When the token's user signed in (a token from before this was kept: when issued)."""
    return float((claims.get("metadata") or {}).get(SIGNED_IN, claims.get("iat", 0)))


def _check_sessions(validity: Validity) -> None:
    """Every request's session and every token issued, checked once more than Chainlit
    does: within the lifetime from the sign-in, not signed out of, and for a user who may
    still sign in.
    The user is noted for the history's owner checks (``REQUEST_USER``)."""

    def checked_session(original: AsyncFunction) -> AsyncFunction:
        async def authenticate_valid(token: str) -> Any:
            user = await original(token)
            ended = await validity.ended(user.identifier, _signed_in_of(_claims(token)))
            if ended or not await validity.member(user):
                logger.warning("session of %r refused: ended or no longer a user", user.identifier)
                raise HTTPException(status_code=401, detail="this session has ended: sign in again")
            REQUEST_USER.set(user.identifier)
            return user

        return authenticate_valid

    def checked_issue(issue: AsyncFunction) -> AsyncFunction:
        async def issue_valid(request: Request, user: Any, *args: Any, **kwargs: Any) -> Any:
            if user is None and CHECKS_FULL.get():
                raise HTTPException(
                    status_code=429,
                    detail="too many sign-ins at once: try again in a moment",
                    headers={"Retry-After": "2"},
                )
            if user is not None:
                signed_in_at = float((user.metadata or {}).get(SIGNED_IN, 0))
                ended = await validity.ended(user.identifier, signed_in_at)
                named = validity.named_again(request, user)
                if ended or not named or not await validity.member(user):
                    logger.warning("token for %r not renewed: sign in again", user.identifier)
                    raise HTTPException(status_code=401, detail="this session has ended")
            return await issue(request, user, *args, **kwargs)

        return issue_valid

    check_sign_ins(checked_session, checked_issue)
