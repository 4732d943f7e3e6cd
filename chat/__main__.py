"""``python -m chat add-user NAME``: add a user who may sign in, or reset one's password.

Usage::

    python -m chat add-user NAME [--users-file PATH]   # password from the terminal
                                                        # (twice) or one line on stdin

No settings are read (sign-in may not be on yet) and Chainlit is not imported: the users
file is read at each sign-in, so the user can sign in at once.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from settings.names import env_name

from .access.users import UserFileError, add_user

__all__ = ["main"]

EXIT_BAD_INPUT = 2
DEFAULT_USERS_FILE = "users.txt"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m chat", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    user = commands.add_parser("add-user", help="add a user who may sign in, or reset one")
    user.add_argument("name")
    user.add_argument(
        "--users-file", type=Path, help=f"default: {env_name('users_file')}, else users.txt"
    )
    return parser


def _read_password() -> str:
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\n")
    import getpass

    password = getpass.getpass("password: ")
    if getpass.getpass("again: ") != password:
        raise UserFileError("the two passwords differ")
    return password


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    path = args.users_file or Path(os.environ.get(env_name("users_file"), DEFAULT_USERS_FILE))
    try:
        add_user(path, args.name, _read_password())
    except UserFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"{args.name} can sign in (users file {path}; set {env_name('users_file')}={path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
