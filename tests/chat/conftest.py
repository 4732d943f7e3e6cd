"""The web app's doors, as visitors meet them: two apps on the session's ``vllm serve``
(what is tested is the app, not the engine), shared by every test of the package. Each
test speaks from loopback addresses of its own (``testing.visitors``), so no test meets
another's counts, whatever the order.

* ``open_app``: no sign-in, tight per-address limits, a trusted proxy's secret (a test can
  be a visitor the proxy names, from any address) and no operations token.
* ``signed_app``: sign-in from a users file and from a proxy's header, history, an
  operations token.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.users import add_user
from testing.accounts import PASSWORD, PROXY_SECRET, SIGNED_ENV
from testing.servers import AppServer, Server

OPEN_ENV = {
    "ERNIE_HISTORY_URL": "off",
    "ERNIE_USER_MAX_REPLIES": "2",
    "ERNIE_USER_MESSAGES_PER_MINUTE": "5",
    "ERNIE_MAX_REPLIES": "1",
    "ERNIE_MAX_CHATS_PER_ADDRESS": "3",
    "ERNIE_AUTH_PROXY_SECRET": PROXY_SECRET,
}
USERS = ("alice", "frank", "gina", "henry", "ivy")


def _remote(model: Path, server: Server, max_tokens: int) -> dict[str, str]:
    return {
        "ERNIE_MODEL": str(model),
        "ERNIE_ENGINE": "remote",
        "ERNIE_REMOTE_URL": server.url,
        "ERNIE_MAX_MODEL_LEN": "2048",
        "ERNIE_MAX_TOKENS": str(max_tokens),
        "ERNIE_WARMUP": "false",
    }


@pytest.fixture(scope="session")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    users = tmp_path_factory.mktemp("access") / "users.txt"
    for name in USERS:
        add_user(users, name, PASSWORD)
    return users


@pytest.fixture(scope="session")
def open_app(
    scripted_model: Path, vllm_server: Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AppServer]:
    env = _remote(scripted_model, vllm_server, 16) | OPEN_ENV
    with AppServer.run(env, tmp_path_factory.mktemp("open") / "app.log") as app:
        app.wait("/readyz", timeout_s=300)
        yield app


@pytest.fixture(scope="session")
def signed_app(scripted_model: Path, vllm_server: Server, users_file: Path) -> Iterator[AppServer]:
    folder = users_file.parent
    env = _remote(scripted_model, vllm_server, 64) | SIGNED_ENV
    env |= {"ERNIE_USERS_FILE": str(users_file)}
    env |= {"ERNIE_HISTORY_URL": f"sqlite:///{folder / 'history.db'}"}
    env |= {"ERNIE_LOG_FILE": str(folder / "logs" / "ernie-chat.log")}  # a folder it makes
    with AppServer.run(env, folder / "app.log") as server:
        server.wait("/readyz", timeout_s=300)
        yield server
