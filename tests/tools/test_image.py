"""The CPU image, built from the repository's Dockerfile and run as an operator runs it.

Built with buildah on a Debian base bootstrapped here (``testing.images`` says why), then
started with the image's own command and user, a host folder as ``/data`` and the demo
model mounted (``testing.image_run``): ready, its HEALTHCHECK passes inside it, a
signed-in user chats; a stop ends it within Docker's grace time with nothing left running
and no error in its console (``docker logs``); a second start keeps ``/data`` (the history,
the full log, torch's compile cache) and lists the chat.

The first start loads from the moment the image is built, on idle CPU, and is raised to
the normal priority before anything is checked. The second start runs on the session's
``vllm serve`` (``ERNIE_ENGINE=remote``, as the history tests' restarts do): what it
proves is the data kept and the stop, and loading a second engine would only repeat the
first's ~40 s.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from testing.accounts import listed_chats, sign_in
from testing.background import raised_until_ready
from testing.chat_client import ChatClient
from testing.image_run import BUILD_S, ENV, PASSWORD, FirstStart, started, wait_ready
from testing.images import Container, image_config
from testing.servers import Server

pytestmark = pytest.mark.engine

GRACE_S = 10  # docker stop's default


async def chat_once(url: str, cookie: dict[str, str]) -> str | None:
    async with ChatClient.connect(url, headers=cookie) as chat:
        reply = await chat.send("你好")
        assert reply.error is None and reply.text, reply
        return chat.thread_id


def serves(box: Container, url: str, health: list[str]) -> dict[str, str]:
    """Healthy by its own check, its user, its code read-only; a user's signed-in cookie."""
    port = url.rsplit(":", 1)[1]
    check = box.exec(*[part.replace("8000", port) for part in health[1:]])
    assert check.returncode == 0, check.stderr
    assert box.exec("id", "-u").stdout.strip() == "1000"
    assert box.exec("touch", "/app/app.py").returncode != 0  # the code is read-only
    for planted in ("/app/uvloop.py", "/app/.env", "/app/chat/evil.py"):
        assert box.exec("touch", planted).returncode != 0, planted  # nothing added
    # It listens on every address, and answered any Host: a page whose name was rebound
    # to 127.0.0.1 drove it. localhost only, until the operator lists more names.
    rebound = httpx.get(url, headers={"Host": f"rebind.example:{port}"}, timeout=10)
    assert rebound.status_code == 421 and "ERNIE_ALLOWED_HOSTS" in rebound.text
    assert httpx.get(url, headers={"Host": f"localhost:{port}"}, timeout=10).status_code == 200
    return sign_in(url, "alice", PASSWORD)


def stop(box: Container, log: Path) -> None:
    """A stop within the grace time, nothing left running, no error on its console."""
    processes = box.process_tree()
    started_at = time.monotonic()
    assert box.stop(grace_s=GRACE_S) is not None, "not stopped within the grace time"
    took = time.monotonic() - started_at
    left = [p.pid for p in processes if p.is_running() and p.status() != "zombie"]
    assert left == [], "processes left after the stop"
    assert took < GRACE_S
    console = log.read_text(errors="replace")
    assert "Traceback" not in console and " ERROR " not in console, console[-3000:]


def test_the_image_serves_stops_and_keeps_its_data(
    image_first_start: FirstStart, vllm_server: Server, tmp_path: Path
) -> None:
    first = image_first_start
    box, url = first.container(timeout_s=BUILD_S)
    health = image_config(first.image)["Healthcheck"]["Test"]
    assert health[0] == "CMD", health
    log = first.folder / "container.log"
    raised_until_ready(box.process.pid, lambda: wait_ready(box, url, log))
    cookie = serves(box, url, health)
    thread = asyncio.run(chat_once(url, cookie))
    stop(box, log)
    kept = files_in(first.volumes["/data"])
    assert {"history.db", "logs/ernie-chat.log"} <= kept, kept
    assert any(name.startswith("inductor/") for name in kept), "no compile cache on /data"

    remote = {"ERNIE_ENGINE": "remote", "ERNIE_REMOTE_URL": vllm_server.url}
    again = tmp_path / "again"
    with started(first.image, first.volumes, again, ENV | remote) as (box, url):
        wait_ready(box, url, again / "container.log")
        cookie = serves(box, url, health)
        assert thread in listed_chats(url, cookie)
        stop(box, again / "container.log")
    assert kept <= files_in(first.volumes["/data"]), "files on /data lost by the restart"


def files_in(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
