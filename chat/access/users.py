"""Who may sign in: a file of users with salted scrypt password hashes.

One user per line, ``name:scrypt:<n>:<r>:<p>:<salt, base64>:<hash, base64>``; lines
starting with ``#`` are comments. The file is read at each sign-in, so a user added
with ``python -m chat add-user NAME`` can sign in at once, without a restart.

Usage::

    add_user(path, "alice", "a long password")     # or replaces alice's password
    verify_password(path, "alice", "a long password")  # True
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from pathlib import Path

__all__ = [
    "MIN_PASSWORD_CHARS",
    "UserFileError",
    "add_user",
    "is_user",
    "remove_user",
    "verify_password",
]

MIN_PASSWORD_CHARS = 8
_NAME = re.compile(r"^[\w.@+-]{1,64}$")
# scrypt's cost, OWASP's minimum (N=2**17, r=8, p=1): 128 MiB and ~0.3 s per sign-in.
# Each line keeps its own cost, so lines written with a lower one still verify.
_N, _R, _P = 2**17, 8, 1
_SALT_BYTES = 16
_MAX_MEMORY = 256 << 20  # above 128 * r * N, which scrypt needs
# Hashed for a name the file lacks: an unknown name costs the same time as a known one.
_DUMMY_SALT = b"\0" * _SALT_BYTES


class UserFileError(ValueError):
    """A user name, password or line of the users file is not usable (one line)."""


def _hash(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=_MAX_MEMORY)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _read(path: Path) -> dict[str, str]:
    """The users file's lines by user name."""
    users = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        name, _, rest = line.partition(":")
        if not _NAME.match(name) or not rest.startswith("scrypt:"):
            raise UserFileError(f"{path}:{number}: not 'name:scrypt:...'")
        users[name] = line
    return users


def add_user(path: Path, name: str, password: str) -> None:
    """Add ``name`` to the users file (created if missing), or set a new password."""
    if not _NAME.match(name):
        raise UserFileError(f"user name {name!r}: use 1-64 letters, digits or . _ @ + -")
    if len(password) < MIN_PASSWORD_CHARS:
        raise UserFileError(f"the password needs at least {MIN_PASSWORD_CHARS} characters")
    salt = os.urandom(_SALT_BYTES)
    digest = _hash(password, salt, _N, _R, _P)
    users = _read(path) if path.exists() else {}
    users[name] = f"{name}:scrypt:{_N}:{_R}:{_P}:{_b64(salt)}:{_b64(digest)}"
    _write(path, users)


def remove_user(path: Path, name: str) -> bool:
    """Take ``name`` out of the users file (their sessions end at the next request)."""
    users = _read(path)
    if users.pop(name, None) is None:
        return False
    _write(path, users)
    return True


def is_user(path: Path, name: str) -> bool:
    """Whether ``name`` is in the users file now."""
    return name in _read(path)


def _write(path: Path, users: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text("".join(line + "\n" for line in users.values()), encoding="utf-8")
    temporary.chmod(0o600)
    temporary.replace(path)  # whole or not at all, for a server reading it meanwhile


def verify_password(path: Path, name: str, password: str) -> bool:
    """Whether ``name`` is in the users file with this password."""
    line = _read(path).get(name)
    if line is None:
        _hash(password, _DUMMY_SALT, _N, _R, _P)  # as long as a known name takes
        return False
    try:
        _, _, n, r, p, salt, digest = line.split(":")
        expected = base64.b64decode(digest)
        actual = _hash(password, base64.b64decode(salt), int(n), int(r), int(p))
    except ValueError as exc:
        raise UserFileError(f"{path}: the line of user {name!r} is damaged") from exc
    return hmac.compare_digest(actual, expected)
