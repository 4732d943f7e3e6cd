"""Shared fixtures: hermetic settings, demo models built at test time, real engines.

The engines are the real vLLM ``AsyncLLM`` on its CPU backend, one per demo model for
the whole session (each takes ~20 s to start). The harness itself (servers, chat
client, browser, polling, demo settings) is the ``testing`` package.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

# vLLM's CPU platform runs each engine's model in a third process (its "mp" executor), where
# a GPU with one device runs it inside the engine core ("uni"). The tests take the GPU's
# shape: one process fewer to start for every engine (about 6 s and 8 s of CPU each) and one
# thread each, so that the session's engines share both cores instead of all binding core 0.
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# vLLM's CPU sampler compiles its random draw with Inductor in every engine process (a C++
# build: 12-20 s on a fresh machine, 3.7 s from the cache); the tests draw it eagerly (the
# same arithmetic), as --enforce-eager already runs their model.
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")

import vllm  # noqa: F401  (first here: its log handlers keep the real stdout and stderr)

from engine import ChatEngine
from engine.model.demo import write_demo_model
from engine.plan.preflight import preflight
from testing import background, chat_apps
from testing.demo import APP_ENV, DEMO_APP_ENV, ENGINE_SETTINGS, hermetic_settings
from testing.engines import DemoApp, RunningEngine
from testing.group import StartingGroup, group_started
from testing.image_run import FirstStart, first_start
from testing.images import build_test_image
from testing.load_checks import run_load_checks
from testing.locks import gpu_lock_report
from testing.servers import AppServer, Server, openai_server

pytest_plugins = ["testing.chat_apps"]  # the chat tests' apps


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No ERNIE_* variable or .env file from the machine leaks into a test."""
    for name in list(os.environ):
        if name.upper().startswith("ERNIE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield


@pytest.fixture(scope="session")
def demo_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo model: whole-character tokenizer."""
    return write_demo_model(tmp_path_factory.mktemp("demo-model"))


@pytest.fixture(scope="session")
def byte_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo model with a byte-level tokenizer (a Chinese character is 3 tokens)."""
    return write_demo_model(tmp_path_factory.mktemp("demo-bytes"), byte_level=True)


@pytest.fixture(scope="session")
def scripted_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo model whose every reply is engine.model.demo.SCRIPTED_REPLY, looping."""
    return write_demo_model(tmp_path_factory.mktemp("demo-scripted"), scripted=True)


def _engine(model: Path, **values: Any) -> ChatEngine:
    return ChatEngine.from_settings(
        hermetic_settings(model=str(model), **{**ENGINE_SETTINGS, **values})
    )


@pytest.fixture(scope="session")
async def engines(demo_model: Path, byte_model: Path) -> AsyncIterator[dict[str, RunningEngine]]:
    """The session's two in-process engines, loaded at once (their loads overlap)."""
    demo = _engine(demo_model)
    byte = _engine(byte_model, stream_interval_ms=0, warmup=False)
    demo.start()
    byte.start()
    loading = demo.status(), byte.status()
    await asyncio.gather(demo.wait_ready(), byte.wait_ready())
    yield {"demo": RunningEngine(demo, loading[0]), "byte": RunningEngine(byte, loading[1])}
    await asyncio.gather(demo.shutdown(), byte.shutdown())


@pytest.fixture(scope="session")
def running(engines: dict[str, RunningEngine]) -> RunningEngine:
    """The demo model's engine (whole-character tokenizer)."""
    return engines["demo"]


@pytest.fixture(scope="session")
def byte_engine(engines: dict[str, RunningEngine]) -> ChatEngine:
    """The byte-level tokenizer's engine, streaming every delta (no warm-up)."""
    return engines["byte"].engine


@pytest.fixture(scope="session")
def vllm_loading(
    scripted_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """The session's ``vllm serve``, started at the lowest priority and not waited for:
    from the session's first test on (``early_servers``), it loads on idle CPU."""
    settings = hermetic_settings(model=str(scripted_model), **ENGINE_SETTINGS)
    log = tmp_path_factory.mktemp("vllm-serve") / "vllm.log"
    with openai_server(preflight(settings), log, prefix=background.lowest_priority()) as server:
        yield server


@pytest.fixture(scope="session")
def vllm_server(vllm_loading: Server) -> Server:
    """A real ``vllm serve`` (CPU) on the scripted model, for every remote-backend test
    (the history's app restarts use it too: a restart then loads no engine), at the normal
    priority from its first test on (again once loaded: no process it starts stays idle)."""
    background.raised_until_ready(
        vllm_loading.process.pid, lambda: vllm_loading.wait("/v1/models", timeout_s=300)
    )
    return vllm_loading


@pytest.fixture(scope="session")
def group_loading(
    scripted_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StartingGroup]:
    """The serve tests' worker group (``testing.group``), started at the lowest priority
    and not waited for: from the session's first test on (``early_servers``)."""
    folder = tmp_path_factory.mktemp("group")
    with group_started(scripted_model, folder, prefix=background.lowest_priority()) as group:
        yield group


@pytest.fixture(scope="session")
def image_first_start(
    demo_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FirstStart]:
    """The test image's first run, started in the background as soon as the image is
    built, at the lowest priority (``testing.image_run``): from the session's first test on."""
    with first_start(tmp_path_factory.mktemp("container"), demo_model) as first:
        yield first


@pytest.fixture(scope="session")
def recovery_model(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the demo model that ``tests/engine/test_recovery.py`` deletes, so that its
    app's rebuild fails for real."""
    return Path(shutil.copytree(demo_model, tmp_path_factory.mktemp("recovery") / "model"))


@pytest.fixture(scope="session")
def recovery_loading(recovery_model: Path) -> Iterator[AppServer]:
    """The recovery test's app (its own: the test kills its engine twice and it exits),
    started at the lowest priority and not waited for: from the session's first test on."""
    env = APP_ENV | {
        "ERNIE_MODEL": str(recovery_model),
        "ERNIE_MAX_TOKENS": "1500",
        "ERNIE_IGNORE_EOS": "true",
        "ERNIE_RESTART_TRIES": "1",
    }
    log = recovery_model.parent / "app.log"
    with AppServer.run(env, log, prefix=background.lowest_priority()) as server:
        yield server


@pytest.fixture
def recovery_app(recovery_loading: AppServer) -> AppServer:
    """The recovery test's app at the normal priority, serving its page (``vllm_server``'s way)."""
    app = recovery_loading
    background.raised_until_ready(app.process.pid, lambda: app.wait("/", timeout_s=180))
    return app


# What a selected test needs: what the session starts early for it, at its first test.
EARLY = {
    "vllm_server": "vllm_loading",
    "group": "group_loading",
    "image_first_start": "image_first_start",
    "recovery_app": "recovery_loading",
    **chat_apps.EARLY,
}


@pytest.fixture(scope="session", autouse=True)
def early_servers(request: pytest.FixtureRequest) -> None:
    """Start what ``EARLY`` names (the session's ``vllm serve``, the serve tests' group, the
    image's first run, the recovery test's app, the chat tests' apps) at the session's
    first test when a selected test needs it: each loads on the CPU the tests before it
    leave idle."""
    background.start_early(request, EARLY)


@pytest.fixture(scope="session")
def demo_app(scripted_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoApp]:
    """``chainlit run app.py`` on the local engine and the scripted model: the browser
    tests use it first and meet it loading."""
    log = tmp_path_factory.mktemp("demo-app") / "app.log"
    env = DEMO_APP_ENV | {"ERNIE_MODEL": str(scripted_model)}
    # Under nice: vLLM's CPU engine spins on both cores while it generates, and a browser
    # under test must still get CPU.
    with AppServer.run(env, log, nice=15) as server:
        server.wait("/", timeout_s=180)
        yield DemoApp(server, server.readyz())


@pytest.fixture(scope="session")
def load_checks() -> dict[str, subprocess.CompletedProcess[str]]:
    """The start-up checks (``testing.load_checks``), started when the session collected."""
    return dict(background.result("load checks", run_load_checks, timeout_s=1200))


ENGINE_FIXTURES = {"engines", "vllm_server", "demo_app", "load_checks", *EARLY.values()}


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the slow work that a selected test needs and no test watches (the load checks,
    the image build, the lock dry run), beside the tests (``testing.background``)."""
    selected = {item.path.name for item in session.items}
    if any("load_checks" in getattr(item, "fixturenames", ()) for item in session.items):
        background.start("load checks", run_load_checks)
    if "test_image.py" in selected:
        background.start("image", build_test_image)
    if "test_locks.py" in selected:
        background.start("gpu lock", gpu_lock_report)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses a session engine is an ``engine`` test, marked or not, so
    ``pytest -m "not engine"`` stays the fast loop (tests that start their own engine
    carry the mark themselves)."""
    for item in items:
        uses = set(getattr(item, "fixturenames", ()))
        if uses & ENGINE_FIXTURES and item.get_closest_marker("engine") is None:
            item.add_marker(pytest.mark.engine)
