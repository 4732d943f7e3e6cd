"""Sign-in, when the settings turn it on: from the users file, or a trusted proxy's header.

Chainlit then refuses pages and websockets without a session it signed
(``CHAINLIT_AUTH_SECRET``). The users file's format and hashing are ``deploy.users``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path

import chainlit as cl

from deploy.settings import Settings
from deploy.users import verify_password

__all__ = ["register"]

logger = logging.getLogger(__name__)


def register(settings: Settings) -> bool:
    """Register the sign-in callbacks the settings ask for; whether sign-in is on."""
    if settings.users_file is not None:
        _register_password(settings.users_file)
    if settings.auth_header is not None:
        _register_header(settings.auth_header)
    return settings.users_file is not None or settings.auth_header is not None


def _register_password(users_file: Path) -> None:
    @cl.password_auth_callback
    async def sign_in(name: str, password: str) -> cl.User | None:
        """A user of the users file with the right password (scrypt: off the loop)."""
        if await asyncio.to_thread(verify_password, users_file, name, password):
            return cl.User(identifier=name, metadata={"provider": "password"})
        logger.warning("sign-in refused for %r", name)
        return None


def _register_header(header: str) -> None:
    @cl.header_auth_callback
    async def sign_in_from_proxy(headers: Mapping[str, str]) -> cl.User | None:
        """The user a trusted proxy names in its header (the proxy must drop the
        clients' own copies of that header)."""
        name = headers.get(header)
        return cl.User(identifier=name, metadata={"provider": "header"}) if name else None
