"""app.py as Chainlit imports it: one engine across reloads, and the Chainlit patches."""

from __future__ import annotations

import importlib
import time
from pathlib import Path

import pytest

from testing.servers import ROOT


@pytest.fixture
def app_settings(monkeypatch: pytest.MonkeyPatch, demo_model: Path) -> None:
    """Importing app.py builds the engine's plan: it needs a model it can read, and a KV
    cache size of its own (the default share of RAM is checked against what the session's
    servers leave free)."""
    monkeypatch.setenv("ERNIE_MODEL", str(demo_model))
    monkeypatch.setenv("ERNIE_KV_CACHE_GB", "0.5")
    monkeypatch.chdir(ROOT)  # Chainlit reads its config from the working directory


@pytest.mark.usefixtures("app_settings")
def test_reloading_the_app_keeps_the_one_engine() -> None:
    """``chainlit run -w`` re-imports app.py on change: no second engine may appear."""
    import app
    from chat.runtime import runtime

    engine = runtime().engine
    importlib.reload(app)
    assert runtime().engine is engine
    assert app.__doc__ and len((ROOT / "app.py").read_text().splitlines()) <= 60


async def test_chainlit_builds_messages_and_steps_without_a_blocking_sleep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chainlit's Message and Step sleep 1 ms, blocking, when built; the app drops that."""
    import chainlit as cl
    from chainlit.context import init_http_context

    from chat.chainlit_door import drop_blocking_sleep

    drop_blocking_sleep("chainlit.message", "chainlit.step")
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    init_http_context()
    cl.Message(content="你好")
    cl.Step(name="on_message")
    assert slept == []
    time.sleep(0.5)  # the rest of the process keeps the time module as it is
    assert slept == [0.5]
