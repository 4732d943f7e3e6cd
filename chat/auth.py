"""Sign-in, when the settings turn it on: from the users file, or a trusted proxy's header.

Chainlit then refuses pages and websockets without a session it signed
(``CHAINLIT_AUTH_SECRET``). The users file's format and hashing are ``deploy.users``; a
proxy's header counts only with the proxy's shared secret (``deploy.access``).
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
from chainlit.config import config
from fastapi import HTTPException

from deploy.settings import Settings
from deploy.users import is_user, verify_password

from .addresses import CLIENT_ADDRESS, REQUEST_USER
from .limits import SignInAttempts

__all__ = ["register"]

logger = logging.getLogger(__name__)


def register(settings: Settings) -> bool:
    """Register the sign-in callbacks the settings ask for; whether sign-in is on."""
    config.project.user_session_timeout = int(settings.session_hours * 3600)
    if settings.users_file is not None:
        _register_password(settings.users_file)
    _check_sessions(settings.users_file)
    if settings.auth_header is not None and settings.auth_proxy_secret is not None:
        secret = settings.auth_proxy_secret.get_secret_value().encode()
        _register_header(settings.auth_header, settings.auth_proxy_secret_header, secret)
    return settings.users_file is not None or settings.auth_header is not None


def _register_password(users_file: Path) -> None:
    attempts = SignInAttempts()

    @cl.password_auth_callback
    async def sign_in(name: str, password: str) -> cl.User | None:
        """A user of the users file with the right password (scrypt: off the loop), unless
        that name or this address failed too often lately."""
        keys = [f"name:{name}", f"address:{CLIENT_ADDRESS.get()}"]
        if attempts.blocked(keys, now=time.monotonic()):
            logger.warning("sign-in refused for %r: too many failures (%s)", name, keys[1])
            return None
        if await asyncio.to_thread(verify_password, users_file, name, password):
            return cl.User(identifier=name, metadata={"provider": "password"})
        attempts.failed(keys, now=time.monotonic())
        logger.warning("sign-in refused for %r", name)
        return None


def _register_header(header: str, secret_header: str, secret: bytes) -> None:
    @cl.header_auth_callback
    async def sign_in_from_proxy(headers: Mapping[str, str]) -> cl.User | None:
        """The user the proxy names in its header, once the proxy proved itself with the
        shared secret (compared in constant time; the proxy must drop the clients' own
        copies of both headers)."""
        given = headers.get(secret_header, "").encode()
        if not hmac.compare_digest(given, secret):
            logger.warning("header sign-in refused: the proxy's secret is missing or wrong")
            return None
        name = headers.get(header)
        return cl.User(identifier=name, metadata={"provider": "header"}) if name else None


def _check_sessions(users_file: Path | None) -> None:
    """Each request's session is Chainlit's, checked once more: a password user must
    still be in the users file (Chainlit's token alone outlives a removal), and the user
    is noted for the history's owner checks (``REQUEST_USER``)."""
    original = chainlit_auth.authenticate_user
    if getattr(original, "_checks_membership", False):
        return

    async def authenticate_member(token: str) -> Any:
        user = await original(token)
        provider = (getattr(user, "metadata", None) or {}).get("provider")
        if users_file is not None and provider == "password":
            member = await asyncio.to_thread(is_user, users_file, user.identifier)
        else:
            member = True  # a proxy's users are the proxy's to end
        if not member:
            logger.warning("session of %r refused: not in the users file", user.identifier)
            raise HTTPException(status_code=401, detail="this user can no longer sign in")
        REQUEST_USER.set(user.identifier)
        return user

    authenticate_member._checks_membership = True  # type: ignore[attr-defined]
    # Chainlit's get_current_user (HTTP routes and the websocket) calls it by this name.
    chainlit_auth.authenticate_user = authenticate_member  # type: ignore[assignment]
