"""The CPU image, built from the repository's Dockerfile and run as an operator runs it.

Built with buildah on a Debian base bootstrapped here (``testing.images`` says why), then
started with the image's own command and user, a host folder as ``/data`` and the demo
model mounted: ready, its HEALTHCHECK passes inside it, a signed-in user chats; a stop
ends it within Docker's grace time with nothing left running and no error in its console
(``docker logs``); a second start keeps ``/data`` (the history, the full log, torch's
compile cache) and lists the chat. The second start runs on the session's ``vllm serve``
(``ERNIE_ENGINE=remote``, as the history tests' restarts do): what it proves is the data
kept and the stop, and loading a second engine would only repeat the first's ~40 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from deploy.users import add_user
from testing import background
from testing.accounts import listed_chats, sign_in
from testing.chat_client import ChatClient
from testing.images import Container, build_test_image, image_config
from testing.servers import Server, free_port

pytestmark = pytest.mark.engine

PASSWORD = "image-pass-1"
GRACE_S = 10  # docker stop's default
ENV = {
    "ERNIE_MODEL": "/model",
    "ERNIE_KV_CACHE_GB": "0.5",
    "ERNIE_MAX_MODEL_LEN": "2048",
    "ERNIE_MAX_NUM_SEQS": "8",
    "ERNIE_MAX_TOKENS": "16",
    "ERNIE_USERS_FILE": "/data/users.txt",
    "CHAINLIT_AUTH_SECRET": "image-secret-" + "x" * 40,
}


@pytest.fixture(scope="module")
def image() -> str:
    """Built in the background from the session's start (``tests/conftest.py``)."""
    return str(background.result("image", build_test_image, timeout_s=1800))


@pytest.fixture(scope="module")
def volumes(tmp_path_factory: pytest.TempPathFactory, demo_model: Path) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("container")
    data, model = folder / "data", folder / "model"
    shutil.copytree(demo_model, model)
    data.mkdir()
    add_user(data / "users.txt", "alice", PASSWORD)
    for path in [data, *data.rglob("*")]:
        os.chown(path, 1000, 1000)
    for path in [model, *model.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return {"/data": data, "/model": model}


def the_command(image: str, port: int) -> list[str]:
    """The image's own command, on a free port of this machine (the host's network)."""
    command = list(image_config(image)["Cmd"])
    command[command.index("--port") + 1] = str(port)
    return command


@contextlib.contextmanager
def running(
    image: str, volumes: dict[str, Path], folder: Path, env: dict[str, str]
) -> Iterator[tuple[Container, str]]:
    """The container started with ``env`` and ready, and its URL."""
    port = free_port()
    folder.mkdir()
    log = folder / "container.log"
    with Container.run(image, volumes, env, log, the_command(image, port)) as box:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and box.process.poll() is None:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        else:
            pytest.fail(f"the container never got ready:\n{log.read_text()[-3000:]}")
        yield box, url


async def chat_once(url: str, cookie: dict[str, str]) -> str | None:
    async with ChatClient.connect(url, headers=cookie) as chat:
        reply = await chat.send("你好")
        assert reply.error is None and reply.text, reply
        return chat.thread_id


def test_the_image_serves_stops_and_keeps_its_data(
    image: str, volumes: dict[str, Path], vllm_server: Server, tmp_path: Path
) -> None:
    config = image_config(image)
    health = config["Healthcheck"]["Test"]
    assert health[0] == "CMD", health
    first: dict[str, object] = {}
    remote = {"ERNIE_ENGINE": "remote", "ERNIE_REMOTE_URL": vllm_server.url}
    for round_, env in (("first", ENV), ("again", ENV | remote)):
        with running(image, volumes, tmp_path / round_, env) as (box, url):
            port = url.rsplit(":", 1)[1]
            check = box.exec(*[part.replace("8000", port) for part in health[1:]])
            assert check.returncode == 0, check.stderr
            assert box.exec("id", "-u").stdout.strip() == "1000"
            assert box.exec("touch", "/app/app.py").returncode != 0  # the code is read-only
            for planted in ("/app/uvloop.py", "/app/.env", "/app/chat/evil.py"):
                assert box.exec("touch", planted).returncode != 0, planted  # nothing added
            cookie = sign_in(url, "alice", PASSWORD)
            if round_ == "first":
                first["thread"] = asyncio.run(chat_once(url, cookie))
            else:
                assert first["thread"] in listed_chats(url, cookie)
            processes = box.process_tree()
            started_at = time.monotonic()
            assert box.stop(grace_s=GRACE_S) is not None, "not stopped within the grace time"
            took = time.monotonic() - started_at
            left = [p.pid for p in processes if p.is_running() and p.status() != "zombie"]
            assert left == [], "processes left after the stop"
            assert took < GRACE_S
            console = (tmp_path / round_ / "container.log").read_text(errors="replace")
            assert "Traceback" not in console and " ERROR " not in console, console[-3000:]
            if round_ == "first":
                first["files"] = files_in(volumes["/data"])
    kept = first["files"]
    assert isinstance(kept, set) and {"history.db", "logs/ernie-chat.log"} <= kept, kept
    assert any(name.startswith("inductor/") for name in kept), "no compile cache on /data"
    assert kept <= files_in(volumes["/data"]), "files on /data lost by the restart"


def files_in(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
