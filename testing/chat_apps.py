"""The chat tests' apps, as fixtures (a pytest plugin: ``tests/conftest.py`` loads it, and
starts each app at the session's first test, ``EARLY``). On the session's ``vllm serve``
(what is tested is the app, not the engine); each test speaks from loopback addresses of
its own (``testing.visitors``), so no test meets another's counts, whatever the order.

* ``open_app``: no sign-in, tight per-address limits, a trusted proxy's secret (a test can
  be a visitor the proxy names, from any address) and no operations token.
* ``signed_app``: sign-in from a users file and from a proxy's header, history, an
  operations token.
* ``history``: ``tests/chat/test_history.py``'s app on SQLite and on a real PostgreSQL.
* ``signed_group``: ``signed_app``'s sign-in on two workers behind the group's HAProxy,
  with a history file they share.
* ``replicas``: two of ``signed_app``'s kind, each alone in its process with a folder of
  its own (as on two machines), counting in one PostgreSQL (``ERNIE_COUNTS_URL``): one
  reply at once over both, eight may wait.

Each ``*_loading`` fixture starts its app at the lowest priority, not waited for: it loads
on the CPU the tests before its own leave idle.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from chat.access.users import add_user
from testing import background
from testing.accounts import PASSWORD, PROXY_SECRET, SIGNED_ENV
from testing.history import HistoryApp, new_database, postgres_server
from testing.servers import AppServer, Server

OPEN_ENV = {
    "ERNIE_HISTORY_URL": "off",
    "ERNIE_USER_MAX_REPLIES": "2",
    "ERNIE_USER_MESSAGES_PER_MINUTE": "5",
    "ERNIE_MAX_REPLIES": "1",
    "ERNIE_MAX_WAITING": "8",
    "ERNIE_MAX_CHATS_PER_ADDRESS": "3",
    "ERNIE_AUTH_PROXY_SECRET": PROXY_SECRET,
    # The doors for connections and sessions, at sizes a test sees within seconds.
    "ERNIE_MAX_CONNECTIONS_PER_ADDRESS": "32",
    "ERNIE_REQUEST_TIMEOUT_S": "3",
    "ERNIE_SESSION_KEEP_MINUTES": "0.05",
}
USERS = ("alice", "frank", "gina", "henry", "ivy", "kate", "liam")  # kate, liam: the export test


LONGEST_REPLY = 512  # the panel's end (a long reply to hold or stop is as long)
DAILY_TOKENS = 1500  # the replicas' day: two of the panel's longest replies, past a fifth
RELOADED_REPLY = 1536  # signed_app's end: a reply still being written after a page reloads


def _remote(model: Path, server: Server, reply_tokens: int) -> dict[str, str]:
    return {
        "ERNIE_MODEL": str(model),
        "ERNIE_ENGINE": "remote",
        "ERNIE_REMOTE_URL": server.url,
        "ERNIE_MAX_MODEL_LEN": "2048",
        "ERNIE_MAX_TOKENS": str(LONGEST_REPLY),
        "ERNIE_REPLY_TOKENS": str(reply_tokens),
        "ERNIE_WARMUP": "false",
    }


@pytest.fixture(scope="session")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    users = tmp_path_factory.mktemp("access") / "users.txt"
    for name in USERS:
        add_user(users, name, PASSWORD)
    return users


# The fixture a test needs -> the one that starts it (``background.start_early``).
EARLY = {"open_app": "open_app_loading", "signed_app": "signed_app_loading"}
EARLY |= {"history": "history_loading", "signed_group": "signed_group_loading"}
EARLY |= {"replicas": "replicas_loading"}


def _raised(loading: AppServer) -> AppServer:
    """``loading`` at the normal priority, once it serves (``/readyz``)."""
    background.raised_until_ready(
        loading.process.pid, lambda: loading.wait("/readyz", timeout_s=300)
    )
    return loading


@pytest.fixture(scope="session")
def open_app_loading(
    scripted_model: Path, vllm_loading: Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AppServer]:
    env = _remote(scripted_model, vllm_loading, 16) | OPEN_ENV
    log = tmp_path_factory.mktemp("open") / "app.log"
    with AppServer.run(env, log, prefix=background.lowest_priority()) as app:
        yield app


@pytest.fixture(scope="session")
def open_app(open_app_loading: AppServer, vllm_server: Server) -> AppServer:
    return _raised(open_app_loading)


@pytest.fixture(scope="session")
def signed_app_loading(
    scripted_model: Path, vllm_loading: Server, users_file: Path
) -> Iterator[AppServer]:
    folder = users_file.parent
    env = _remote(scripted_model, vllm_loading, 64) | SIGNED_ENV
    env |= {"ERNIE_USERS_FILE": str(users_file)}
    env |= {"ERNIE_HISTORY_URL": f"sqlite:///{folder / 'history.db'}"}
    env |= {"ERNIE_LOG_FILE": str(folder / "logs" / "ernie-chat.log")}  # a folder it makes
    env |= {"ERNIE_MAX_TOKENS": str(RELOADED_REPLY)}
    with AppServer.run(env, folder / "app.log", prefix=background.lowest_priority()) as app:
        yield app


@pytest.fixture(scope="session")
def signed_app(signed_app_loading: AppServer, vllm_server: Server) -> AppServer:
    return _raised(signed_app_loading)


@pytest.fixture(scope="session")
def signed_group_loading(
    scripted_model: Path, vllm_loading: Server, users_file: Path
) -> Iterator[AppServer]:
    """Two workers behind the group's HAProxy with ``signed_app``'s sign-in and a history
    they share: what one address tries through the one port, whichever worker HAProxy
    picks."""
    folder = users_file.parent / "signed-group"
    folder.mkdir()
    env = _remote(scripted_model, vllm_loading, 16) | SIGNED_ENV | {"ERNIE_WORKERS": "2"}
    env |= {"ERNIE_MAX_REPLIES": "2", "ERNIE_MAX_WAITING": "16"}  # a line over both workers
    env |= {"ERNIE_USERS_FILE": str(users_file)}
    env |= {"ERNIE_HISTORY_URL": f"sqlite:///{folder / 'history.db'}"}
    with AppServer.run(env, folder / "group.log", prefix=background.lowest_priority()) as app:
        yield app


@pytest.fixture(scope="session")
def signed_group(signed_group_loading: AppServer, vllm_server: Server) -> AppServer:
    group = signed_group_loading

    def ready() -> None:  # in a thread: a test's event loop may be running here
        group.wait("/readyz", timeout_s=300)
        with ThreadPoolExecutor(1) as waiting:
            waiting.submit(asyncio.run, group.every_worker_ready()).result()

    background.raised_until_ready(group.process.pid, ready)
    return group


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(scope="session")
def history_loading(
    scripted_model: Path,
    vllm_loading: Server,
    postgres_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, HistoryApp]]:
    """``history``'s app on each database, not waited for."""
    sqlite = tmp_path_factory.mktemp("sqlite")
    urls = {"sqlite": f"sqlite:///{sqlite / 'history.db'}", "postgresql": postgres_url}
    folders = {"sqlite": sqlite, "postgresql": tmp_path_factory.mktemp("postgresql")}
    with contextlib.ExitStack() as stack:
        places = {
            name: HistoryApp(scripted_model, vllm_loading.url, folders[name], url)
            for name, url in urls.items()
        }
        for place in places.values():
            stack.callback(place.stack.close)
            place.start(prefix=background.lowest_priority())
        yield places


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def history(
    request: pytest.FixtureRequest, history_loading: dict[str, HistoryApp], vllm_server: Server
) -> Iterator[HistoryApp]:
    """``tests/chat/test_history.py``'s app on one database, shared by the module's tests
    (the last one restarts it), and stopped after them (its memory back to the others)."""
    place = history_loading[request.param]
    assert place.app is not None
    _raised(place.app)
    yield place
    place.stack.close()


@pytest.fixture(scope="session")
def replicas_loading(
    scripted_model: Path,
    vllm_loading: Server,
    users_file: Path,
    postgres_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[AppServer]]:
    """Two app replicas on one ``vllm serve`` and one PostgreSQL for their counts, a
    user's tokens a day among them (``DAILY_TOKENS``)."""
    with ThreadPoolExecutor(1) as making:  # a test's event loop may be running here
        counts = making.submit(asyncio.run, new_database(postgres_url, "replicas")).result()
    env = _remote(scripted_model, vllm_loading, 64) | SIGNED_ENV | {"ERNIE_HISTORY_URL": "off"}
    env |= {"ERNIE_USERS_FILE": str(users_file), "ERNIE_COUNTS_URL": counts}
    env |= {"ERNIE_MAX_REPLIES": "1", "ERNIE_MAX_WAITING": "8"}
    env |= {"ERNIE_DAILY_TOKENS": str(DAILY_TOKENS)}
    with contextlib.ExitStack() as stack:
        apps = []
        for name in ("replica-a", "replica-b"):
            folder = tmp_path_factory.mktemp(name)
            log = folder / "app.log"
            started = AppServer.run(env, log, prefix=background.lowest_priority())
            apps.append(stack.enter_context(started))
        yield apps


@pytest.fixture(scope="session")
def replicas(replicas_loading: list[AppServer], vllm_server: Server) -> list[AppServer]:
    return [_raised(app) for app in replicas_loading]
