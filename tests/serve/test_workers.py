"""A group behind HAProxy's one port, as ``scripts/start.sh`` starts it (``python -m serve``)
on the CPU engine and the scripted model: ``ERNIE_ENGINES=2`` real engine cores with
``ERNIE_WORKERS=2`` Chainlit workers each (``testing.group``: it loads from the session's
start, on idle CPU). The chats go through HAProxy's one port over Socket.IO, each visitor
from an address of its own. One group for the whole module, in order: the last two tests
kill a worker, then an engine core, and each waits until the group is whole again.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import time
from collections.abc import Iterator

import httpx
import psutil
import pytest
import socketio

from serve.worker import WORKER_TITLE
from testing.background import raised_until_ready
from testing.browser import STATS_LINE
from testing.chat_client import ChatClient
from testing.demo import DEMO_APP_ENV
from testing.group import CHATS, CONNECTIONS, REPLIES, StartingGroup
from testing.polling import until
from testing.servers import AppServer
from testing.shapes import (
    SlowReader,
    Tally,
    answer_to,
    at_connect,
    back_to_back,
    reconnect,
    with_idle_tabs,
)
from testing.visitors import CLAIMS, async_http_client, closed, idle_connections, visitor

pytestmark = pytest.mark.engine

LONG_REPLY = {"temperature": 0.8, "top_p": 0.8, "max_tokens": 4096, "system_prompt": "zh"}
WORKERS = 4


@pytest.fixture(scope="module")
def started(group_loading: StartingGroup) -> Iterator[StartingGroup]:
    """The session's group (``testing.group``: loading since the session's first test),
    at the normal priority, every worker ready; stopped after the module (its memory back
    for the tests after it)."""
    server = group_loading.server

    def ready() -> None:
        server.wait("/readyz", timeout_s=300)
        asyncio.run(server.every_worker_ready())

    raised_until_ready(server.process.pid, ready)
    yield group_loading
    server.stop()


@pytest.fixture(scope="module")
def group(started: StartingGroup) -> AppServer:
    return started.server


def metric(server: AppServer, name: str) -> dict[str, float]:
    """A metric's samples from ``/metrics``, by label text (``""`` without labels)."""
    text = httpx.get(f"{server.url}/metrics", timeout=5).text
    found = re.findall(rf"^{name}(\{{[^}}]*\}})? (\S+)$", text, re.M)
    return {labels: float(value) for labels, value in found}


def chats_by_pid(server: AppServer) -> dict[int, float]:
    """Chats open on each live worker, by its pid (one sample per worker process)."""
    samples = metric(server, "ernie_chats_open").items()
    return {int(re.findall(r"\d+", labels)[0]): value for labels, value in samples}


def chats_per_worker(server: AppServer) -> list[float]:
    return sorted(chats_by_pid(server).values())


async def spread_as(server: AppServer, expected: list[int]) -> None:
    """Until the workers hold ``expected`` chats (sorted): a closed chat's end reaches its
    worker a moment after the client has gone."""
    await until(lambda: chats_per_worker(server) == expected, 15, f"chats spread as {expected}")


def processes_of(server: AppServer, title: str) -> list[psutil.Process]:
    """The group's live processes whose command line reads ``title``."""
    found = []
    for process in psutil.Process(server.process.pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):  # one that ended meanwhile, or a zombie
            if title in " ".join(process.cmdline()):
                found.append(process)
    return found


def workers_of(server: AppServer) -> list[psutil.Process]:
    return processes_of(server, WORKER_TITLE)


def test_the_launcher_fetched_the_model_once_while_the_port_said_starting(
    started: StartingGroup,
) -> None:
    group, page = started.server, started.first_answer()  # HAProxy's page, not its bare 503
    assert page.status_code == 503 and page.headers["retry-after"] == "5", page.text
    assert "The chat is starting" in page.text and "聊天正在启动" in page.text, page.text
    hub = started.hub
    weights = (hub.folder / "model.safetensors").stat().st_size
    # once, by the launcher (the cores found it in the cache; safetensors readers ask for
    # its header again, a few KiB)
    assert weights <= hub.served["model.safetensors"] < weights + 1_000_000, hub.served
    megabytes = re.search(r"downloaded the model: ([\d.,]+) of ([\d.,]+) MB", group.log.read_text())
    assert megabytes and megabytes.group(1) == megabytes.group(2) != "0.0", megabytes


async def test_sixteen_chats_spread_over_every_worker_and_see_only_their_own_tokens(
    group: AppServer,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        chats = [
            await stack.enter_async_context(ChatClient.connect(group.url, source=visitor()))
            for _ in range(16)
        ]
        await spread_as(group, [4] * WORKERS)  # HAProxy: the fewest connections, one port
        replies = await asyncio.gather(*(c.send(f"第{i}个问题") for i, c in enumerate(chats)))
        for chat, reply in zip(chats, replies, strict=True):
            assert reply.error is None and reply.final is not None, reply.error
            assert len(chat.streamed_ids) == 1  # one reply, and no other chat's tokens
        assert len(set.union(*(c.streamed_ids for c in chats))) == 16
    finished = metric(group, "ernie_replies_total")
    assert finished['{finish_reason="length"}'] >= 16  # counted over every worker


async def test_a_stop_on_each_worker_frees_its_request(group: AppServer) -> None:
    await spread_as(group, [0] * WORKERS)
    async with contextlib.AsyncExitStack() as stack:
        chats = [
            await stack.enter_async_context(ChatClient.connect(group.url, source=visitor()))
            for _ in range(WORKERS)
        ]
        await spread_as(group, [1] * WORKERS)  # one chat on each worker
        aborted = metric(group, "ernie_replies_total").get('{finish_reason="abort"}', 0.0)
        sending = []
        for chat in chats:
            await chat.change_settings(LONG_REPLY)
            sending.append(asyncio.create_task(chat.send("写一篇很长的文章")))
        await group.wait_for_running(WORKERS, within_s=30)
        for left, chat in enumerate(reversed(chats)):
            await until(lambda c=chat: c.reply and c.reply.frames, 60, "the reply's text")
            await chat.stop()
            await group.wait_for_running(WORKERS - 1 - left, within_s=5)
        for reply in await asyncio.gather(*sending):
            assert reply.error is None and STATS_LINE not in reply.text  # stopped, kept
        await until(
            lambda: (
                metric(group, "ernie_replies_total").get('{finish_reason="abort"}')
                == aborted + WORKERS
            ),
            5,
            "the aborted replies counted",
        )


async def test_one_address_is_limited_over_the_group_not_per_worker(group: AppServer) -> None:
    here = visitor()
    async with contextlib.AsyncExitStack() as stack:
        chats = [
            await stack.enter_async_context(ChatClient.connect(group.url, source=here))
            for _ in range(CHATS)
        ]
        await spread_as(group, [4, 4, 4, 5])  # each worker alone would take more
        with pytest.raises(socketio.exceptions.ConnectionError):
            await stack.enter_async_context(ChatClient.connect(group.url, source=here))
        replying, last = chats[:REPLIES], chats[REPLIES]
        for chat in replying:
            await chat.change_settings(LONG_REPLY)
        sending = [asyncio.create_task(chat.send("写一篇很长的文章")) for chat in replying]
        await group.wait_for_running(REPLIES, within_s=60)
        refused = await last.send("你好")  # on a worker that runs only a quarter of the 16
        assert refused.error is not None and f"{REPLIES} replies" in refused.error
        for chat in replying:
            await until(lambda c=chat: c.reply and c.reply.frames, 60, "the reply's text")
            await chat.stop()
        await asyncio.gather(*sending)
        await group.wait_for_running(0, within_s=10)


async def test_chats_at_connect_and_bursts_back_to_back_are_all_answered(
    group: AppServer,
) -> None:
    eager = await at_connect(group.url, chats=16)
    assert (eager.sent, eager.answered, eager.lost) == (16, 16, 0), eager
    bursts = await back_to_back(group.url, chats=8, bursts=3)
    assert (bursts.sent, bursts.answered, bursts.lost) == (24, 24, 0), bursts


@pytest.mark.parametrize("claim", CLAIMS, ids=[next(iter(c)) for c in CLAIMS])
async def test_through_haproxy_a_client_naming_its_own_address_gets_no_more_chats(
    group: AppServer, claim: dict[str, str]
) -> None:
    """HAProxy replaced X-Forwarded-For but passed X_Forwarded_For, which the workers took
    as the client's address: a client changing it each time had no limit."""
    here = visitor()
    async with contextlib.AsyncExitStack() as stack:
        for n in range(CHATS):
            own = {name: value.replace(".0.", f".{n}.") for name, value in claim.items()}
            await stack.enter_async_context(ChatClient.connect(group.url, headers=own, source=here))
        with pytest.raises(socketio.exceptions.ConnectionError):
            await stack.enter_async_context(
                ChatClient.connect(group.url, headers=claim, source=here)
            )
        async with ChatClient.connect(group.url, source=visitor()) as other:  # not them
            reply = await other.send("你好")
        assert reply.error is None and reply.final is not None


async def test_idle_connections_from_one_address_cannot_take_the_port(group: AppServer) -> None:
    """300 idle TCP connections made /healthz through HAProxy time out (maxconn 256 under a
    1,024 open-file limit, a client timeout of an hour, no request timeout). The group's
    ERNIE_REQUEST_TIMEOUT_S is 3 s: those under the address's cap are closed after it."""
    flood, refused_at_once = await idle_connections(group.url, visitor(), 300)
    try:
        async with async_http_client(visitor()) as http:
            started = time.monotonic()
            health = await http.get(f"{group.url}/healthz", timeout=5)
            assert health.status_code == 200 and time.monotonic() - started < 2
        async with ChatClient.connect(group.url, source=visitor()) as chat:
            assert (await chat.send("你好")).final is not None
        refused = [r for r, _ in flood if await closed(r, within_s=0.1)]
        # past the address's cap: refused while connecting, or closed at once
        assert refused_at_once + len(refused) >= 300 - CONNECTIONS, (refused_at_once, refused)
        left = [r for r, _ in flood if r not in refused]
        assert all([await closed(r, within_s=15) for r in left])  # the rest: said nothing
    finally:
        for _, writer in flood:
            writer.close()


async def test_reconnects_idle_tabs_and_a_slow_reader_lose_nothing_through_haproxy(
    group: AppServer,
) -> None:
    """The other shapes, through HAProxy: a dropped socket comes back to its worker (the
    page's cookie) and its reply; idle tabs and a reader that stopped cost the chats beside
    them nothing, and the stopped reader is ended (the demo's ERNIE_SOCKET_TIMEOUT_S)."""
    tally, _ = await reconnect(group.url, chats=WORKERS)
    assert (tally.sent, tally.answered, tally.lost) == (WORKERS, WORKERS, 0), tally
    slow = SlowReader(group.url)
    async with with_idle_tabs(group.url, 200, per_address=10) as tabs, slow.stopped() as ended:
        assert tabs == 200
        beside = await at_connect(group.url, chats=8)
        assert (beside.sent, beside.answered, beside.lost) == (8, 8, 0), beside
        assert await ended(float(DEMO_APP_ENV["ERNIE_SOCKET_TIMEOUT_S"]) + 4)


async def one_chat_a_worker(stack: contextlib.AsyncExitStack, group: AppServer) -> list[ChatClient]:
    """A chat open on each worker of the group, each from its own address."""
    chats = [
        await stack.enter_async_context(ChatClient.connect(group.url, source=visitor()))
        for _ in range(WORKERS)
    ]
    await spread_as(group, [1] * WORKERS)
    return chats


async def test_killing_a_worker_restarts_its_unit_and_its_chats_go_on(group: AppServer) -> None:
    """A chat open on each worker when one is killed: its unit (its engine core and both its
    workers) restarts, with the cause logged; the unit's pages reconnect to a live worker,
    pages opened at the kill connect to one, and what every page sends meanwhile (held by
    the page, as a browser holds it) is answered; none vanishes."""
    tally = Tally("a worker killed")
    async with contextlib.AsyncExitStack() as stack:
        chats = await one_chat_a_worker(stack, group)
        victim = workers_of(group)[-1]
        victim.send_signal(signal.SIGKILL)
        # Pages opened at once, before HAProxy's checks see the unit down, reach a live
        # worker (they went to the dead ones: the fewest connections; 4 of 8 got a 503).
        opened = [ChatClient.connect(group.url, source=visitor()) for _ in range(WORKERS)]
        late = await asyncio.gather(*(stack.enter_async_context(page) for page in opened))
        cause = re.compile(
            rf"worker \d \(pid {victim.pid}\) was killed by SIGKILL; "
            r"restarting engine core \d's unit \(restart 1\)"
        )
        await until(lambda: cause.search(group.log.read_text(errors="replace")), 30, "the cause")
        sent = [answer_to(chat, "你好", timeout_s=300) for chat in [*chats, *late]]
        for reply in await asyncio.gather(*sent):
            tally.count(reply)
        assert (tally.sent, tally.answered, tally.lost) == (2 * WORKERS, 2 * WORKERS, 0), tally
        assert sum(chat.connects >= 2 for chat in chats) == 2  # the unit's two came back
    await group.every_worker_ready()
    assert len(workers_of(group)) == WORKERS
    assert victim.pid not in {p.pid for p in workers_of(group)}


async def test_killing_an_engine_core_restarts_its_unit_while_the_other_serves(
    group: AppServer,
) -> None:
    def log() -> str:
        return group.log.read_text(errors="replace")

    tally = Tally("an engine core killed")
    async with contextlib.AsyncExitStack() as stack:
        chats = await one_chat_a_worker(stack, group)
        victim = processes_of(group, "VLLM::EngineCore")[0]
        before = {p.pid for p in workers_of(group)}
        victim.send_signal(signal.SIGKILL)
        cause = re.compile(
            rf"engine core \(pid {victim.pid}\) killed by SIGKILL; "
            r"restarting engine core \d's unit \(restart \d\)"  # its 2nd, if its worker died
        )
        await until(lambda: cause.search(log()), 30, "the cause logged")

        def live() -> set[int]:
            return {p.pid for p in workers_of(group)} & before

        await until(lambda: len(live()) == 2, 15, "the unit's workers stopped")
        # The dead unit's chats come back to a live worker (HAProxy: its restarted workers
        # are up at once, but not ready until their core is); all are answered.
        for reply in await asyncio.gather(*(answer_to(c, "你好", timeout_s=60) for c in chats)):
            tally.count(reply)
        assert (tally.sent, tally.answered, tally.lost) == (WORKERS, WORKERS, 0), tally
        assert sum(chats_by_pid(group).get(pid, 0) for pid in live()) == WORKERS
    await group.every_worker_ready()
    after = {p.pid for p in workers_of(group)}
    assert len(after) == WORKERS and len(after & before) == 2  # the other unit kept on
    async with contextlib.AsyncExitStack() as stack:
        chats = [
            await stack.enter_async_context(ChatClient.connect(group.url, source=visitor()))
            for _ in range(WORKERS)
        ]
        await spread_as(group, [1] * WORKERS)  # every worker takes chats again
        for reply in await asyncio.gather(*(chat.send("你好") for chat in chats)):
            assert reply.error is None and reply.final is not None
