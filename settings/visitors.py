"""The access settings: who may sign in, how, where their chats are kept, and their limits.

Header sign-in trusts a proxy: the proxy names the user in ``ERNIE_AUTH_HEADER`` and
proves itself with ``ERNIE_AUTH_PROXY_SECRET`` in ``ERNIE_AUTH_PROXY_SECRET_HEADER`` (a
client that reaches the port directly does not know it). Both sign-ins at once must be
asked for (``ERNIE_AUTH_ALLOW_BOTH``): a proxy's header beside a users file is usually a
mistake that lets the proxy's users skip the passwords.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from settings.company import CompanySignInSettings
from settings.names import env_name
from settings.urls import DatabaseUrlError, database_url

__all__ = ["AUTH_SECRET", "MIN_SECRET_CHARS", "AccessSettings"]

AUTH_SECRET = "CHAINLIT_AUTH_SECRET"  # Chainlit's own variable: signs the session tokens
MIN_SECRET_CHARS = 32


class AccessSettings(CompanySignInSettings):
    """Sign-in, history and per-user limits (part of ``settings.settings.Settings``)."""

    users_file: Path | None = Field(
        None,
        description="Sign-in with these users (add one: python -m chat add-user NAME).",
    )
    auth_header: str | None = Field(
        None,
        min_length=1,
        description="Sign-in by this header, set by a trusted proxy (e.g. X-Forwarded-User).",
    )
    auth_proxy_secret: SecretStr | None = Field(
        None,
        description="The secret a trusted proxy sends in AUTH_PROXY_SECRET_HEADER (at least "
        f"{MIN_SECRET_CHARS} characters, e.g. `openssl rand -hex 32`): needed by AUTH_HEADER; "
        "with it the proxy's X-Forwarded-For counts for the per-address limits.",
    )
    auth_proxy_secret_header: str = Field(
        "X-Proxy-Secret", min_length=1, description="The header that carries the proxy's secret."
    )
    auth_allow_both: bool = Field(
        False, description="Allow the users file and header sign-in at the same time."
    )
    allowed_origins: str | None = Field(
        None,
        description="Other web origins that may use the chat from a browser, comma-separated "
        "(e.g. https://portal.example.com); unset: the app's own origin only.",
    )
    allowed_hosts: str | None = Field(
        None,
        description="Host names the app answers to, comma-separated (e.g. chat.example.com); "
        "unset: the address it listens on and localhost, or any name when it listens on all "
        "addresses (0.0.0.0). A guard against DNS rebinding.",
    )
    ops_token: SecretStr | None = Field(
        None,
        description="Bearer token /metrics and the detail of /readyz need; unset: only the "
        "machine itself (a loopback client) sees them.",
    )
    history_url: str | None = Field(
        "sqlite:///history.db",
        description="Where signed-in users' chats are kept: sqlite:///FILE or "
        "postgresql://USER:PASSWORD@HOST:PORT/DB; off: nowhere.",
    )
    counts_url: str | None = Field(
        None,
        description="Where the visitors' limits, the line and the sign-in tries are counted, "
        "for app replicas on several machines: postgresql://USER:PASSWORD@HOST:PORT/DB (the "
        "history's database will do); unset: on this box (a group's workers share a file).",
    )
    share_links: Literal["off", "signed-in", "anyone"] = Field(
        "signed-in",
        description="Read-only links a signed-in user may make to a chat (the button under "
        "the last reply; the chat as it was then): readable by signed-in users, by anyone "
        "holding the link, or off. Needs the history.",
    )
    share_days: float = Field(
        7, gt=0, le=365, description="How long a chat's read-only link works, in days."
    )
    session_hours: float = Field(
        12, gt=0, le=24 * 30, description="How long a sign-in lasts before signing in again."
    )
    user_max_replies: int = Field(2, ge=1, description="Replies one user may run at once.")
    daily_tokens: int = Field(
        0,
        ge=0,
        description="Tokens one user (or, without sign-in, one address) may spend a day, "
        "counted as the engine counts them (each reply's prompt and reply); the reply's "
        "footer says what is left below a fifth of it, and a message past it is refused "
        "politely until midnight (the server's TZ); 0: no limit.",
    )
    max_chats_per_address: int = Field(
        50, ge=1, description="Chats one client address may hold open without sign-in."
    )
    max_connections_per_address: int = Field(
        256,
        ge=8,
        description="Connections one client address may hold open (idle ones too), at a "
        "group's HAProxy or at the one process, so a flood from one address cannot starve "
        "the others.",
    )
    request_timeout_s: float = Field(
        10,
        ge=1,
        le=300,
        description="How long a client may take to send a request's headers, or leave a "
        "kept-alive connection idle (at a group's HAProxy or the one process): a connection "
        "that says nothing for longer is closed, so idle ones cannot hold the port.",
    )
    socket_timeout_s: float = Field(
        40,
        ge=4,
        le=600,
        description="How long a chat's socket may go without answering the server's ping "
        "(a page that stopped reading) before it is closed and its reply stopped.",
    )
    session_keep_minutes: float = Field(
        5,
        gt=0,
        le=24 * 60,
        description="How long a chat's session is kept after its socket closed, for the "
        "socket to come back to it (a phone changing networks); then its memory is given back.",
    )
    new_chats_per_minute: int = Field(
        60,
        ge=1,
        description="Chat sockets one client address may open a minute, reconnects included; "
        "past it the next is refused (a closed tab's session is kept SESSION_KEEP_MINUTES).",
    )
    requests_per_minute: int = Field(
        600,
        ge=10,
        description="HTTP requests, and apart from them Socket.IO events, one visitor may send "
        "a minute (a third of it at once; /healthz and /readyz not counted): past it a "
        "request gets 429 and a socket is closed.",
    )
    image_sources: str | None = Field(
        None,
        description="Where images in the chat may load from besides the app itself: "
        "space-separated Content-Security-Policy sources (e.g. https://img.example.com); "
        "unset: the app's own origin only, so no reply can send a chat's text to another host.",
    )
    max_replies: int | None = Field(
        None,
        ge=1,
        description="Replies the app runs at once over all users, shared evenly by the "
        "engine cores (more wait in line: ERNIE_MAX_WAITING); unset: twice what the engine "
        "cores batch at once.",
    )
    max_waiting: int | None = Field(
        None,
        ge=0,
        description="Messages that may wait in line for a reply while ERNIE_MAX_REPLIES run, "
        "over all users, shared evenly by the engine cores (more get a polite busy answer; "
        "0: none wait); unset: as many as ERNIE_MAX_REPLIES, so the last in line waits "
        "about one reply's time.",
    )
    user_messages_per_minute: int = Field(
        20, ge=1, description="Messages one user may send a minute."
    )

    @field_validator("allowed_origins")
    @classmethod
    def _check_origins(cls, value: str | None) -> str | None:
        origins = [o.strip().rstrip("/") for o in (value or "").split(",") if o.strip()]
        for origin in origins:
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or not parts.netloc or parts.path:
                raise ValueError(f"{origin!r} is not an origin such as https://chat.example.com")
        return ",".join(origins) or None

    @property
    def origin_list(self) -> list[str]:
        return self.allowed_origins.split(",") if self.allowed_origins else []

    @field_validator("allowed_hosts")
    @classmethod
    def _check_hosts(cls, value: str | None) -> str | None:
        hosts = [h.strip().lower() for h in (value or "").split(",") if h.strip()]
        for host in hosts:
            if "/" in host or "@" in host or " " in host:
                raise ValueError(f"{host!r} is not a host name such as chat.example.com")
        return ",".join(hosts) or None

    @field_validator("image_sources")
    @classmethod
    def _check_image_sources(cls, value: str | None) -> str | None:
        sources = (value or "").replace(",", " ").split()
        for source in sources:
            if any(c in source for c in ";'\""):  # a source, not a directive or a keyword
                raise ValueError(f"{source!r} is not a source such as https://img.example.com")
        return " ".join(sources) or None

    @property
    def allowed_host_list(self) -> list[str]:
        return self.allowed_hosts.split(",") if self.allowed_hosts else []

    @property
    def signs_in(self) -> bool:
        """Whether visitors sign in (a users file, a trusted proxy's header, or a company's
        OpenID Connect provider)."""
        return any((self.users_file, self.auth_header, self.oidc_issuer))

    @property
    def kept_history_url(self) -> str | None:
        """Where chats are kept: nowhere without sign-in (no one would own them)."""
        return self.history_url if self.signs_in else None

    @field_validator("history_url")
    @classmethod
    def _history_database(cls, url: str | None) -> str | None:
        if url is None or url.strip().lower() in ("", "off"):
            return None
        try:
            return database_url(url.strip())
        except DatabaseUrlError as exc:
            raise ValueError(
                f"{exc}; use sqlite:///path/history.db, "
                f"postgresql://user:password@host:5432/db, or off"
            ) from None

    @field_validator("counts_url")
    @classmethod
    def _counts_database(cls, url: str | None) -> str | None:
        if url is None or not url.strip():
            return None
        try:
            checked = database_url(url.strip())
        except DatabaseUrlError as exc:
            checked = f"not a database URL ({exc})"
        if not checked.startswith("postgresql"):
            raise ValueError(
                "not a PostgreSQL URL; use postgresql://user:password@host:5432/db, or leave "
                "it unset to count on this box"
            )
        return checked

    @model_validator(mode="after")
    def _sign_in_is_possible(self) -> Self:
        if self.users_file is not None and not self.users_file.is_file():
            raise ValueError(
                f"{env_name('users_file')}={str(self.users_file)!r}: no such file; create it "
                f"with: python -m chat add-user NAME"
            )
        self._check_proxy()
        signing_key = os.environ.get(AUTH_SECRET, "")
        if self.signs_in and len(signing_key) < MIN_SECRET_CHARS:
            way = "users_file" if self.users_file else "auth_header" if self.auth_header else ""
            which = env_name(way or "oidc_issuer")
            raise ValueError(
                f"{which} turns sign-in on, which needs {AUTH_SECRET} (the key that signs "
                f"sessions, at least {MIN_SECRET_CHARS} characters; "
                f"{len(signing_key)} given): create one with `chainlit create-secret`"
            )
        return self

    def _check_proxy(self) -> None:
        if self.auth_header is None:
            return
        secret = self.auth_proxy_secret.get_secret_value() if self.auth_proxy_secret else ""
        if len(secret) < MIN_SECRET_CHARS:
            raise ValueError(
                f"{env_name('auth_header')} trusts a proxy, which must prove itself: set "
                f"{env_name('auth_proxy_secret')} (at least {MIN_SECRET_CHARS} characters, "
                f"e.g. `openssl rand -hex 32`) and have the proxy send it in "
                f"{self.auth_proxy_secret_header}"
            )
        if self.users_file is not None and not self.auth_allow_both:
            raise ValueError(
                f"{env_name('users_file')} and {env_name('auth_header')} both turn sign-in "
                f"on: keep one, or set {env_name('auth_allow_both')}=true"
            )
