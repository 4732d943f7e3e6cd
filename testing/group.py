"""The worker group the serve tests share (``tests/serve/test_workers.py``), as
``scripts/start.sh`` starts it (``python -m serve``) on the CPU engine and the scripted
model: ``ERNIE_ENGINES=2`` real engine cores with ``ERNIE_WORKERS=2`` Chainlit workers
each, behind HAProxy's one port, the model fetched by the launcher from a hub on this
machine.

The session starts it at its first test, at the lowest priority (``testing.background``),
so it loads on the CPU the tests before it leave idle; its tests then raise it to the
normal priority. The port's first answer (HAProxy's, before any worker is up) is read as
soon as it comes, beside the tests.

Usage::

    with group_started(model, folder, prefix=lowest_priority()) as starting:
        starting.server            # the group's AppServer
        starting.first_answer()    # the port's first answer
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

from .demo import DEMO_APP_ENV
from .hub import HubServer
from .polling import until_sync
from .servers import AppServer, probe

__all__ = ["CHATS", "CONNECTIONS", "GROUP_ENV", "REPLIES", "StartingGroup", "group_started"]

CHATS, REPLIES = 17, 16  # one address's chats and replies over the whole group
CONNECTIONS = 64  # one address's connections at HAProxy
GROUP_ENV = DEMO_APP_ENV | {
    # Two cores on one CPU with two workers each, a small KV cache each (split over them).
    "ERNIE_ENGINES": "2",
    "ERNIE_WORKERS": "2",
    "ERNIE_KV_CACHE_GB": "1",
    "ERNIE_REPLY_TOKENS": "64",
    # No warm-up: four unit starts here (two, then two restarts) would run it four times;
    # the session's demo engine, the demo app and the image run it.
    "ERNIE_WARMUP": "false",
    "ERNIE_MAX_CHATS_PER_ADDRESS": str(CHATS),
    "ERNIE_USER_MAX_REPLIES": str(REPLIES),
    "ERNIE_MAX_CONNECTIONS_PER_ADDRESS": str(CONNECTIONS),
    "ERNIE_REQUEST_TIMEOUT_S": "3",  # idle connections are closed within a test
}
REPO = "test-org/scripted"
FIRST_ANSWER_S = 900  # the launcher may wait that long for idle CPU before HAProxy is up


@dataclass
class StartingGroup:
    server: AppServer
    hub: HubServer  # what the launcher fetched, by file
    first: Future[httpx.Response]

    def first_answer(self) -> httpx.Response:
        """The port's first answer to a browser (HAProxy's, before any worker is up)."""
        return self.first.result(timeout=FIRST_ANSWER_S)


@contextlib.contextmanager
def group_started(
    model: Path, folder: Path, *, prefix: Sequence[str] = ()
) -> Iterator[StartingGroup]:
    """The group started (not waited for), until the block ends."""
    with HubServer.run(model, REPO) as hub, ThreadPoolExecutor(1) as reader:
        env = GROUP_ENV | {"ERNIE_MODEL": REPO, "HF_ENDPOINT": hub.url}
        env |= {"HF_HOME": str(folder / "hf")}
        # Many machines' default limit of open files (the H200 host's): 1,024.
        log = folder / "group.log"
        with AppServer.run(env, log, nice=10, open_files=1024, prefix=prefix) as server:
            yield StartingGroup(server, hub, reader.submit(_first_answer, server))


def _first_answer(server: AppServer) -> httpx.Response:
    def answer(client: httpx.Client) -> httpx.Response | None:
        assert server.process.poll() is None, f"{server.url}: {server.log.read_text()[-2000:]}"
        with contextlib.suppress(httpx.HTTPError):
            return client.get(server.url)
        return None

    with probe() as client:
        response: httpx.Response = until_sync(
            lambda: answer(client),
            FIRST_ANSWER_S,
            lambda: f"answer on {server.url}: {server.log.read_text()[-2000:]}",
            interval_s=0.1,
        )
    return response
