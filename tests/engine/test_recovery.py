"""Engine faults: the engine core process is killed; the app builds a new engine by itself.

Users with an open reply get a clear error, new messages get "restarting" instead of a
hang, later chats work; when every rebuild fails, readiness says so and the process
exits 1 for its supervisor. The engine is the real vLLM engine, killed with SIGKILL,
under the real app (``chainlit run app.py``) driven over Socket.IO.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from pathlib import Path

import psutil
import pytest

from testing.chat_client import ChatClient, Reply, wait_ready
from testing.polling import until
from testing.servers import AppServer

pytestmark = pytest.mark.engine

REBUILD_S = 180  # a new CPU engine: tens of seconds; generous for a busy machine


def engine_cores(pid: int) -> set[int]:
    """The vLLM engine core processes under ``pid``."""
    cores = set()
    for child in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "EngineCore" in child.name() or "EngineCore" in " ".join(child.cmdline()):
                cores.add(child.pid)
    return cores


def kill_engine_core(pid: int) -> None:
    """SIGKILL the one vLLM engine core under ``pid``."""
    (core,) = engine_cores(pid)
    os.kill(core, signal.SIGKILL)


async def wait_for_readyz(app: AppServer, state: str, within_s: float) -> dict[str, object]:
    bodies: list[dict[str, object]] = []

    def in_state() -> bool:
        with contextlib.suppress(Exception):  # the process may be gone
            bodies.append(app.readyz()[1])
        return bool(bodies) and bodies[-1]["state"] == state

    await until(in_state, within_s, f"{state!r} readiness")
    return bodies[-1]


async def test_the_app_rebuilds_a_killed_engine_then_exits_when_it_cannot(
    recovery_app: AppServer, recovery_model: Path
) -> None:
    """The app is ``recovery_app`` (tests/conftest.py): loaded from the session's start."""
    app = recovery_app
    await wait_ready(app.url, REBUILD_S)
    async with ChatClient.connect(app.url) as writer, ChatClient.connect(app.url) as other:
        long_reply = asyncio.create_task(writer.send("写一篇很长的文章"))
        await until(lambda: writer.reply and writer.reply.first_text_at, 120, "reply text")
        kill_engine_core(app.process.pid)
        cut: Reply = await asyncio.wait_for(long_reply, 60)
        assert cut.text and cut.error is not None and "restart" in cut.error  # clear error
        body = await wait_for_readyz(app, "restarting", 10)
        reason = str(body["reason"])
        assert "the engine stopped: EngineCore" in reason and "killed by SIGKILL" in reason
        told = await asyncio.wait_for(other.send("你好"), 10)  # no hang while it rebuilds
        assert told.error is not None and "restart" in told.error and not told.text

        await wait_ready(app.url, REBUILD_S)
        answered = await other.send("你好")
        assert answered.error is None and answered.text

    # Every rebuild fails (the model is gone): readiness says so, then the process exits 1.
    shutil.rmtree(recovery_model)
    kill_engine_core(app.process.pid)
    body = await wait_for_readyz(app, "failed", REBUILD_S)
    assert "1 tries to rebuild it failed" in str(body["reason"])
    assert await asyncio.to_thread(app.process.wait, 60) == 1
    assert "exiting" in app.log.read_text(errors="replace")
