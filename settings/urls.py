"""The history database's URL: as operators write it, as SQLAlchemy's async engine needs it.

Usage::

    database_url("sqlite:///history.db")     # -> sqlite+aiosqlite:///history.db
    redact("postgresql://u:pw@db/chat")      # -> postgresql://***@db/chat
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

__all__ = ["DatabaseUrlError", "database_url", "redact", "redact_setting"]

# The async driver for each database the history supports (all pinned in the locks).
_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}
_ALIASES = {"postgres": "postgresql"}


class DatabaseUrlError(ValueError):
    """Not a URL of a database the history supports."""


def database_url(url: str) -> str:
    """``url`` with its database's async driver: ``sqlite:///x.db`` or
    ``postgresql://user:pw@host/db`` as written by people, as SQLAlchemy's async engine
    needs them."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise DatabaseUrlError(f"not a database URL ({exc})") from None
    backend = _ALIASES.get(parsed.get_backend_name(), parsed.get_backend_name())
    driver = _DRIVERS.get(backend)
    if driver is None:
        raise DatabaseUrlError(f"{backend!r} is not SQLite or PostgreSQL")
    if parsed.drivername not in (backend, driver, *(_ALIASES.keys())):
        raise DatabaseUrlError(f"driver {parsed.drivername!r}: use {driver} (or leave it out)")
    if backend == "sqlite" and not parsed.database:
        raise DatabaseUrlError("a SQLite history needs a file: sqlite:///path/history.db")
    return parsed.set(drivername=driver).render_as_string(hide_password=False)


def redact(url: str) -> str:
    """``url`` without its user information (name and password), for logs and errors (any
    URL: a database's, a server's)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


def redact_setting(value: object) -> str:
    """A settings value as an operator may see it: every URL in it without passwords."""
    text = str(value)
    return ",".join(redact(part) if "@" in part else part for part in text.split(","))
