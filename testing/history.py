"""The history tests' parts: a real PostgreSQL server (Debian's) and the app on a history
database, on the session's ``vllm serve`` (what restarts is the app and its database
connection, not the engine).

Usage::

    with postgres_server() as url:
        place = HistoryApp(model, vllm.url, folder, url)
        place.start(prefix=background.lowest_priority())   # loads on idle CPU
        ...
        app = place.restart()                              # a new process, the same database
        place.stack.close()                                # the end
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from chat.access.users import add_user

from .accounts import PASSWORD
from .polling import until_sync
from .servers import AppServer, free_port

__all__ = [
    "HISTORY_SECRET",
    "HISTORY_USERS",
    "HistoryApp",
    "history_app",
    "new_database",
    "postgres_server",
]

HISTORY_USERS = ("alice", "bob", "carol", "dave", "erin", "fred")  # password: PASSWORD
HISTORY_SECRET = "history-secret-" + "x" * 40


def _postgres_bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    assert found, "PostgreSQL is not installed: apt-get install postgresql (scripts/test.sh)"
    return found[-1].parent


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run it as Debian's postgres user then."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """A PostgreSQL server in a folder of its own until the block ends; its URL."""
    bin_dir = _postgres_bin()
    made = _as_postgres(["mktemp", "-d", "/tmp/ernie-pg-XXXXXX"])
    data = Path(subprocess.check_output(made, text=True).strip())
    initdb = [str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]
    subprocess.run(_as_postgres([*initdb, "--no-sync"]), check=True, capture_output=True)
    port = free_port()
    postgres = [str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-F"]
    server = subprocess.Popen(
        _as_postgres([*postgres, "-h", "127.0.0.1", "-k", str(data)]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    ready = [str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)]
    try:

        def accepting() -> bool:
            assert server.poll() is None, "PostgreSQL exited at start"
            return subprocess.run(ready, capture_output=True).returncode == 0

        until_sync(accepting, 60, "PostgreSQL ready", interval_s=0.3)
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(data, ignore_errors=True)


async def new_database(server_url: str, name: str) -> str:
    """A new, empty database on the server at ``server_url``; its URL."""
    admin = await asyncpg.connect(server_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return f"{server_url.rsplit('/', 1)[0]}/{name}"


@contextlib.contextmanager
def history_app(
    model: Path, remote_url: str, folder: Path, history_url: str, prefix: Sequence[str] = ()
) -> Iterator[AppServer]:
    """The app keeping chats in ``history_url``, its users file and log in ``folder``
    (not waited for)."""
    users = folder / "users.txt"
    if not users.exists():
        for name in HISTORY_USERS:
            add_user(users, name, PASSWORD)
    env = {
        "ERNIE_MODEL": str(model),
        "ERNIE_ENGINE": "remote",
        "ERNIE_REMOTE_URL": remote_url,
        "ERNIE_MAX_MODEL_LEN": "2048",
        "ERNIE_MAX_TOKENS": "1024",  # the stop test's long reply
        "ERNIE_REPLY_TOKENS": "24",
        "ERNIE_WARMUP": "false",
        "ERNIE_USERS_FILE": str(users),
        "ERNIE_HISTORY_URL": history_url,
        "CHAINLIT_AUTH_SECRET": HISTORY_SECRET,
    }
    with AppServer.run(env, folder / "app.log", prefix=prefix) as app:
        yield app


@dataclass
class HistoryApp:
    """The app on one database, shared by a module's tests; ``restart`` ends its process
    and starts a new one on the same database."""

    model: Path
    remote_url: str
    folder: Path
    url: str
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)  # its process
    app: AppServer | None = None

    def start(self, prefix: Sequence[str] = ()) -> AppServer:
        where = (self.model, self.remote_url, self.folder, self.url)
        self.app = self.stack.enter_context(history_app(*where, prefix))
        return self.app

    def restart(self) -> AppServer:
        self.stack.close()
        app = self.start()
        app.wait("/readyz", timeout_s=180)
        return app
