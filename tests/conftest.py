"""Shared fixtures: hermetic settings, demo models built at test time, real engines.

The engines are the real vLLM ``AsyncLLM`` on its CPU backend, one per demo model for
the whole session (each takes ~20 s to start).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engine import ChatEngine, EngineStatus, Settings, StreamEvent, TextChunk
from engine.demo import write_demo_model

# Small enough for two engines on a 2-core, 24 GiB machine.
ENGINE_SETTINGS: dict[str, Any] = {
    "kv_cache_gb": 0.5,
    "max_model_len": 2048,
    "max_tokens": 256,
    "max_num_seqs": 32,
}


async def collect(stream: object) -> list[StreamEvent]:
    """Every event of a reply stream (closed after)."""
    events: list[StreamEvent] = []
    async with contextlib.aclosing(stream) as items:  # type: ignore[type-var]
        async for event in items:
            events.append(event)
    return events


def text_of(events: list[StreamEvent]) -> str:
    """The reply's text."""
    return "".join(e.text for e in events if isinstance(e, TextChunk))


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No ERNIE_* variable or .env file from the machine leaks into a test."""
    for name in list(os.environ):
        if name.upper().startswith("ERNIE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield


def hermetic_settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@pytest.fixture(scope="session")
def demo_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo model: whole-character tokenizer."""
    return write_demo_model(tmp_path_factory.mktemp("demo-model"))


@pytest.fixture(scope="session")
def byte_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo model with a byte-level tokenizer (a Chinese character is 3 tokens)."""
    return write_demo_model(tmp_path_factory.mktemp("demo-bytes"), byte_level=True)


@dataclass
class RunningEngine:
    engine: ChatEngine
    status_while_loading: EngineStatus


async def _running(model: Path, **values: Any) -> AsyncIterator[RunningEngine]:
    engine = ChatEngine(hermetic_settings(model=str(model), **{**ENGINE_SETTINGS, **values}))
    engine.start()
    loading = engine.status()
    await engine.wait_ready()
    yield RunningEngine(engine, loading)
    await engine.shutdown()


@pytest.fixture(scope="session")
async def running(demo_model: Path) -> AsyncIterator[RunningEngine]:
    async for item in _running(demo_model):
        yield item


@pytest.fixture(scope="session")
async def byte_engine(byte_model: Path) -> AsyncIterator[ChatEngine]:
    async for item in _running(byte_model, stream_interval_ms=0, warmup=False):
        yield item.engine


@pytest.fixture(scope="session")
def scripted_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo model whose every reply is engine.demo.SCRIPTED_REPLY, looping."""
    return write_demo_model(tmp_path_factory.mktemp("demo-scripted"), scripted=True)
