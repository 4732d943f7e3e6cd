"""The test image run as an operator runs it (``tests/tools/test_image.py``): its own
command and user, on a free port of this machine (a container shares the host's network),
a host folder as ``/data`` and the demo model mounted.

The first run loads an engine, which takes a minute on a 2-core machine: the session
starts it as soon as the image is built (``FirstStart``), at the lowest priority
(``testing.background``), so it loads on the CPU the other tests leave idle; the test then
raises it to the normal priority (``raised_until_ready``) before it checks anything, its
stop included.

Usage::

    with first_start(folder, demo_model) as first:       # at the session's first test
        box, url = first.container(timeout_s=1800)        # in the test: built and started
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

from chat.access.users import add_user

from . import background
from .images import Container, build_test_image, image_config
from .polling import until_sync
from .servers import free_port, probe

__all__ = ["BUILD_S", "ENV", "PASSWORD", "FirstStart", "first_start", "started", "wait_ready"]

FIRST_START = "image first start"  # its background job
PASSWORD = "image-pass-1"
ENV = {
    "ERNIE_MODEL": "/model",
    "ERNIE_KV_CACHE_GB": "0.5",
    "ERNIE_MAX_MODEL_LEN": "2048",
    "ERNIE_MAX_NUM_SEQS": "8",
    "ERNIE_MAX_TOKENS": "16",
    "ERNIE_USERS_FILE": "/data/users.txt",
    "CHAINLIT_AUTH_SECRET": "image-secret-" + "x" * 40,
}
BUILD_S = 1800  # a machine with nothing cached builds the base and the lock's install


def volumes_in(folder: Path, demo_model: Path) -> dict[str, Path]:
    """``/data`` (a users file, owned by the image's user 1000) and ``/model``."""
    data, model = folder / "data", folder / "model"
    shutil.copytree(demo_model, model)
    data.mkdir()
    add_user(data / "users.txt", "alice", PASSWORD)
    for path in [data, *data.rglob("*")]:
        os.chown(path, 1000, 1000)
    for path in [model, *model.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return {"/data": data, "/model": model}


@contextlib.contextmanager
def started(
    image: str,
    volumes: dict[str, Path],
    folder: Path,
    env: dict[str, str],
    prefix: Sequence[str] = (),
) -> Iterator[tuple[Container, str]]:
    """The container started with ``env`` (not waited for), and its URL."""
    port = free_port()
    folder.mkdir()
    command = list(image_config(image)["Cmd"])  # the image's own, on this port
    command[command.index("--port") + 1] = str(port)
    log = folder / "container.log"
    with Container.run(image, volumes, env, log, command, prefix=prefix) as box:
        yield box, f"http://127.0.0.1:{port}"


def wait_ready(box: Container, url: str, log: Path, timeout_s: float = 300) -> None:
    """Until the container's ``/readyz`` says ready; AssertionError with its console's end
    if it exits or the time runs out."""

    def ready(client: httpx.Client) -> bool:
        assert box.process.poll() is None, f"the container exited:\n{log.read_text()[-3000:]}"
        with contextlib.suppress(httpx.HTTPError):
            return client.get(f"{url}/readyz", timeout=2).status_code == 200
        return False

    with probe() as client:
        until_sync(
            lambda: ready(client),
            timeout_s,
            lambda: f"ready container:\n{log.read_text()[-3000:]}",
            interval_s=1,
        )


class FirstStart:
    """The first run, started in the background once the image is built."""

    def __init__(self, folder: Path, volumes: dict[str, Path]) -> None:
        self.folder, self.volumes = folder, volumes
        self.image = ""
        self._stack = contextlib.ExitStack()
        self._lock = threading.Lock()
        self._closed = False
        background.start(FIRST_START, self._start)

    def _start(self) -> tuple[Container, str] | None:
        image = background.result("image", build_test_image, timeout_s=BUILD_S)
        with self._lock:
            if self._closed:
                return None
            low = background.lowest_priority()
            run = started(image, self.volumes, self.folder, ENV, prefix=low)
            self.image = image
            return self._stack.enter_context(run)

    def container(self, timeout_s: float) -> tuple[Container, str]:
        """The started container (still at the lowest priority) and its URL."""
        first = background.result(FIRST_START, self._start, timeout_s=timeout_s)
        if first is None:
            raise RuntimeError("the first start was closed before the image was built")
        return first

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._stack.close()


@contextlib.contextmanager
def first_start(folder: Path, demo_model: Path) -> Iterator[FirstStart]:
    """The first run started in the background, in ``folder`` (``first/``, with the
    volumes beside it), until the block ends."""
    first = FirstStart(folder / "first", volumes_in(folder, demo_model))
    try:
        yield first
    finally:
        first.close()
