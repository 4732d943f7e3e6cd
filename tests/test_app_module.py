"""app.py as a module: its strings in both languages, and one engine across reloads."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.browser import ROOT

TRANSLATIONS = ROOT / ".chainlit" / "translations"


def app_strings(language: str) -> dict[str, object]:
    data: dict[str, dict[str, object]] = json.loads(
        (TRANSLATIONS / f"{language}.json").read_text(encoding="utf-8")
    )
    return data["app"]


def test_english_and_chinese_have_the_same_keys_and_placeholders() -> None:
    english, chinese = app_strings("en-US"), app_strings("zh-CN")
    assert english.keys() == chinese.keys()
    for key, text in english.items():
        if isinstance(text, str):
            assert set(re.findall(r"{(\w+)}", text)) == set(
                re.findall(r"{(\w+)}", str(chinese[key]))
            ), key
    assert len(english["starters"]) == len(chinese["starters"])  # type: ignore[arg-type]


def test_every_key_the_app_uses_exists() -> None:
    source = (ROOT / "app.py").read_text(encoding="utf-8")
    used = set(re.findall(r'\bt\("(\w+)"', source))
    assert used and used <= app_strings("en-US").keys()


@pytest.fixture
def app_settings(monkeypatch: pytest.MonkeyPatch, demo_model: Path) -> None:
    """Importing app.py builds the engine's plan: it needs a model it can read."""
    monkeypatch.setenv("ERNIE_MODEL", str(demo_model))
    monkeypatch.chdir(ROOT)  # Chainlit reads its config from the working directory


@pytest.mark.usefixtures("app_settings")
def test_the_app_falls_back_to_english_for_other_languages() -> None:
    import app

    (TRANSLATIONS / "xx-XX.json").write_text('{"chat": {}}', encoding="utf-8")
    try:
        assert app.app_strings("xx-XX") == app_strings("en-US")  # a file without "app"
        assert app.app_strings("ja") == app_strings("en-US")
        assert app.app_strings("zh") == app_strings("zh-CN")
    finally:
        (TRANSLATIONS / "xx-XX.json").unlink()


@pytest.mark.usefixtures("app_settings")
def test_reloading_the_app_keeps_the_one_engine() -> None:
    """``chainlit run -w`` re-imports app.py on change: no second engine may appear."""
    import importlib

    import app

    engine = app.ENGINE
    reloaded = importlib.reload(app)
    assert reloaded.ENGINE is engine


@pytest.mark.usefixtures("app_settings")
async def test_chainlit_builds_messages_and_steps_without_a_blocking_sleep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chainlit's Message and Step sleep 1 ms, blocking, when built; the app drops that."""
    import time

    import chainlit as cl
    from chainlit.context import init_http_context

    import app  # noqa: F401  (applies the fix)

    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    init_http_context()
    cl.Message(content="你好")
    cl.Step(name="on_message")
    assert slept == []
    time.sleep(0.5)  # the rest of the process keeps the time module as it is
    assert slept == [0.5]
