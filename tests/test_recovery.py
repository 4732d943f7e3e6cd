"""Engine faults: the engine core process is killed; the app builds a new engine by itself.

Users with an open reply get a clear error, new messages get "restarting" instead of a
hang, later chats work; when every rebuild fails, readiness says so and the process
exits 1 for its supervisor. The engine is the real vLLM engine, killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import psutil
import pytest

from bench.chat_client import ChatClient, Reply, wait_ready
from engine import ChatEngine, EngineRestartingError, EngineState
from engine.core import new_request_id
from engine.sampling import ChatOptions
from engine.stream import ReplyEnd, TextChunk
from tests.browser import AppServer
from tests.conftest import ENGINE_SETTINGS, hermetic_settings

REBUILD_S = 180  # a new CPU engine: tens of seconds; generous for a busy machine


def engine_cores(pid: int) -> set[int]:
    """The vLLM engine core processes under ``pid``."""
    cores = set()
    for child in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "EngineCore" in child.name() or "EngineCore" in " ".join(child.cmdline()):
                cores.add(child.pid)
    return cores


def kill_engine_core(pid: int, *, besides: frozenset[int] = frozenset()) -> None:
    """SIGKILL the one vLLM engine core under ``pid`` that is not one of ``besides``
    (the test session's other engines)."""
    (core,) = engine_cores(pid) - besides
    os.kill(core, signal.SIGKILL)


@pytest.fixture
def model_copy(demo_model: Path, tmp_path: Path) -> Path:
    """A model folder the test may delete, so that a rebuild fails for real."""
    return Path(shutil.copytree(demo_model, tmp_path / "model"))


@pytest.fixture
def other_engines() -> frozenset[int]:
    """The engine cores this test process already has (other tests' engines)."""
    return frozenset(engine_cores(os.getpid()))


@pytest.fixture
async def own_engine(model_copy: Path, other_engines: frozenset[int]) -> AsyncIterator[ChatEngine]:
    """An engine of its own: killing it must not touch the other tests' engines."""
    settings = {**ENGINE_SETTINGS, "warmup": False, "restart_tries": 1}
    engine = ChatEngine(hermetic_settings(model=str(model_copy), **settings))
    await engine.wait_ready()
    yield engine
    await engine.shutdown()


async def wait_for_state(engine: ChatEngine, state: EngineState, within_s: float) -> None:
    await until(lambda: engine.status().state is state, within_s, f"engine {state}")


async def until(condition: Callable[[], object], within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, f"no {what} in {within_s} s"
        await asyncio.sleep(0.1)


async def test_a_killed_engine_is_rebuilt_and_chats_go_on(
    own_engine: ChatEngine, model_copy: Path, other_engines: frozenset[int]
) -> None:
    engine = own_engine
    reply = engine.chat(
        [], "讲一个很长的故事", request_id=new_request_id(), options=ChatOptions(max_tokens=1500)
    )
    async with contextlib.aclosing(reply) as events:
        assert isinstance(await anext(events), TextChunk)  # the reply is streaming
        kill_engine_core(os.getpid(), besides=other_engines)
        with pytest.raises(EngineRestartingError):  # the open reply: a clear error
            async for _ in events:
                pass
    status = engine.status()
    assert status.state is EngineState.RESTARTING
    assert "stopped: EngineCore killed by SIGKILL" in (status.reason or "")  # the cause
    with pytest.raises(EngineRestartingError):  # a new message: told at once, no hang
        await asyncio.wait_for(engine.wait_ready(), 1)

    await wait_for_state(engine, EngineState.READY, REBUILD_S)
    events_after = [e async for e in engine.chat([], "你好", request_id=new_request_id())]
    assert isinstance(events_after[-1], ReplyEnd)
    assert events_after[-1].finish_reason in ("stop", "length")
    assert engine.running_requests == 0

    # A death the rebuild cannot survive: its tries end, and the engine says it gave up.
    shutil.rmtree(model_copy)
    kill_engine_core(os.getpid(), besides=other_engines)
    reason = await asyncio.wait_for(engine.wait_gave_up(), REBUILD_S)
    assert engine.status().state is EngineState.FAILED
    assert "1 tries to rebuild it failed" in reason


@pytest.fixture
def recovering_app(model_copy: Path, tmp_path: Path) -> Iterator[AppServer]:
    env = {
        "ERNIE_MODEL": str(model_copy),
        "ERNIE_KV_CACHE_GB": "0.5",
        "ERNIE_MAX_MODEL_LEN": "2048",
        "ERNIE_MAX_TOKENS": "1500",
        "ERNIE_IGNORE_EOS": "true",
        "ERNIE_WARMUP": "false",
        "ERNIE_RESTART_TRIES": "1",
    }
    server = AppServer.start(env, tmp_path / "app.log")
    yield server
    server.stop()


async def wait_for_readyz(app: AppServer, state: str, within_s: float) -> dict[str, object]:
    bodies: list[dict[str, object]] = []

    def in_state() -> bool:
        with contextlib.suppress(Exception):  # the process may be gone
            bodies.append(app.readyz()[1])
        return bool(bodies) and bodies[-1]["state"] == state

    await until(in_state, within_s, f"{state!r} readiness")
    return bodies[-1]


async def test_the_app_rebuilds_a_killed_engine_then_exits_when_it_cannot(
    recovering_app: AppServer, model_copy: Path
) -> None:
    app = recovering_app
    await wait_ready(app.url, REBUILD_S)
    async with ChatClient.connect(app.url) as writer, ChatClient.connect(app.url) as other:
        long_reply = asyncio.create_task(writer.send("写一篇很长的文章"))
        while writer.reply is None or writer.reply.first_text_at is None:
            await asyncio.sleep(0.02)
        kill_engine_core(app.process.pid)
        cut: Reply = await asyncio.wait_for(long_reply, 60)
        assert cut.text and cut.error is not None and "restart" in cut.error  # clear error
        body = await wait_for_readyz(app, "restarting", 10)
        assert "killed by SIGKILL" in str(body["reason"])
        told = await asyncio.wait_for(other.send("你好"), 10)  # no hang while it rebuilds
        assert told.error is not None and "restart" in told.error and not told.text

        await wait_ready(app.url, REBUILD_S)
        answered = await other.send("你好")
        assert answered.error is None and answered.text

    # Every rebuild fails (the model is gone): readiness says so, then the process exits 1.
    shutil.rmtree(model_copy)
    kill_engine_core(app.process.pid)
    body = await wait_for_readyz(app, "failed", REBUILD_S)
    assert "tries to rebuild it failed" in str(body["reason"])
    assert await asyncio.to_thread(app.process.wait, 60) == 1
    assert "exiting" in app.log.read_text(errors="replace")
