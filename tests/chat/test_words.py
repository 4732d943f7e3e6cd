"""Every word a user reads: the translations in both languages, Chainlit's fallback for
others, and the rendering of notices, footers and errors (pure functions, no server)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, get_args

import pytest

from chat.access.turns import Place
from chat.errors import LimitExceededError, MalformedMessageError
from chat.ui.render import (
    context_note,
    engine_notes,
    final_reply,
    footer,
    footer_notes,
    line_text,
    time_split,
)
from chat.words import Strings, error_text, i18n, strings_for
from engine import (
    EngineFailedError,
    EngineRestartingError,
    EngineState,
    EngineStatus,
    EngineTimes,
    GenerationError,
    MessageRefusedError,
    PromptTooLongError,
    ReplyEnd,
    ReplyStats,
)
from engine.errors import RefusalReason
from testing.servers import ROOT

TRANSLATIONS = ROOT / ".chainlit" / "translations"
LANGUAGES = ("en-US", "zh-CN")


def app_table(language: str) -> dict[str, Any]:
    data = json.loads((TRANSLATIONS / f"{language}.json").read_text(encoding="utf-8"))
    return dict(data["app"])


@pytest.fixture(params=LANGUAGES)
def t(request: pytest.FixtureRequest) -> Strings:
    return Strings(app_table(request.param))


def test_english_and_chinese_have_the_same_keys_and_placeholders() -> None:
    english, chinese = app_table("en-US"), app_table("zh-CN")
    assert english.keys() == chinese.keys()
    for key, text in english.items():
        if isinstance(text, str):
            placeholders = set(re.findall(r"{(\w+)", text))
            assert placeholders == set(re.findall(r"{(\w+)", str(chinese[key]))), key
    assert len(english["starters"]) == len(chinese["starters"])


def test_every_key_the_app_uses_exists() -> None:
    used = set()
    for source in (ROOT / "chat").rglob("*.py"):
        used |= set(re.findall(r'\bt\(\s*"(\w+)"', source.read_text(encoding="utf-8")))
    # Keys the code builds: one per refusal reason the engine raises.
    used |= {f"refused_{reason}" for reason in get_args(RefusalReason)}
    assert {"loading", "thinking", "refused_empty"} <= used  # the scan sees the code
    for language in LANGUAGES:
        assert used <= app_table(language).keys(), language


def test_other_languages_fall_back_through_chainlits_loading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "translations"
    shutil.copytree(TRANSLATIONS, folder)
    (folder / "xx-XX.json").write_text('{"chat": {}}', encoding="utf-8")  # Chainlit's own
    monkeypatch.setattr("chainlit.config.config_translation_dir", str(folder))
    strings_for.cache_clear()
    try:
        assert strings_for("xx-XX").table == app_table("en-US")  # a file without "app"
        assert strings_for("ja").table == app_table("en-US")
        assert strings_for("zh").table == app_table("zh-CN")  # the regional variant
        # As Chainlit's own page strings: no zh-TW file, no "zh" file, so English.
        assert strings_for("zh-TW").table == app_table("en-US")
    finally:
        strings_for.cache_clear()
    assert strings_for.cache_info().maxsize == i18n.LANGUAGES_KEPT  # bounded by clients


def test_engine_notes(t: Strings) -> None:
    ready = EngineStatus(EngineState.READY, 12.4)
    assert engine_notes(ready, t, loaded_now=True, demo=False) == [t("ready", seconds=12)]
    assert engine_notes(ready, t, loaded_now=False, demo=True) == [t("demo_model")]
    restarting = EngineStatus(EngineState.RESTARTING, 1.0, "killed")
    assert engine_notes(restarting, t, loaded_now=True, demo=True) == [t("restarting")]
    failed = EngineStatus(EngineState.FAILED, 3.0, "no model")
    assert engine_notes(failed, t, loaded_now=True, demo=False) == [t("failed", reason="no model")]


def end(
    reason: str,
    *,
    dropped: int = 0,
    ttft: float | None = 0.021,
    prompt: int = 30,
    tokens: int = 64,
) -> ReplyEnd:
    stats = ReplyStats(prompt, tokens, ttft, 1.021)
    return ReplyEnd(reason, stats, dropped)  # type: ignore[arg-type]


def test_the_footer_says_where_the_replys_time_went_when_the_engine_timed_it(t: Strings) -> None:
    timed = ReplyStats(200, 64, 0.3, 1.0, EngineTimes(0.25, 0.012, 0.63, 160))
    split = t("time_split", waited="0.7", reading="12", cached=80, tokens=64, writing="0.6")
    assert time_split(timed, t, waited_s=0.45) == split
    notes = footer_notes(ReplyEnd("stop", timed), t, reply_budget=64, waited_s=0.45)
    assert notes[-1] == split and "⏱" in split
    assert not any("⏱" in note for note in footer_notes(end("stop"), t, reply_budget=64))


def test_footer_notes_how_the_reply_ended_and_its_stats(t: Strings) -> None:
    cut = footer(end("length", dropped=2), t, reply_budget=64)
    assert t("cut_by_length", max_tokens=64) in cut and t("dropped_turns", count=2) in cut
    stats = t("stats", tokens=64, ttft_ms="21", speed="63.0", prompt=30)
    assert cut.endswith(f"*{stats}*  ") and cut.startswith("\n\n")
    assert t("stopped") in footer(end("abort", ttft=None), t, reply_budget=64)
    lost = footer(end("abort", ttft=None), t, reply_budget=64, lost=True)
    assert t("stopped_connection_lost") in lost and t("stopped") not in lost
    assert "-" in footer(end("abort", ttft=None), t, reply_budget=64)
    assert footer(None, t, reply_budget=64) == ""
    finished = final_reply("**注意：**正文", footer_notes(end("stop"), t, reply_budget=64))
    assert finished.startswith("**注意**：正文\n\n")


@pytest.mark.parametrize(
    ("error", "key", "values"),
    [
        (LimitExceededError("replies", 2, retry_after_s=None), "limit_replies", {"limit": 2}),
        (
            LimitExceededError("per_minute", 20, retry_after_s=4.2),
            "limit_per_minute",
            {"limit": 20, "seconds": 5},
        ),
        (
            LimitExceededError("daily_tokens", 200_000, retry_after_s=3 * 3600 + 1),
            "limit_daily_tokens",
            {"limit": 200_000, "hours": 4},
        ),
        (MessageRefusedError("empty", 0, 1), "refused_empty", {"size": 0, "limit": 1}),
        (PromptTooLongError(900, 800), "too_long", {"tokens": 900, "limit": 800}),
        (EngineRestartingError("killed"), "restarting", {}),
        (EngineFailedError("no model"), "failed", {"reason": "no model"}),
        (GenerationError(), "generation_failed", {}),
        (MalformedMessageError("no text"), "refused_malformed", {}),
    ],
)
def test_errors_are_words_for_the_user(
    t: Strings, error: Exception, key: str, values: dict[str, Any]
) -> None:
    assert error_text(error, t) == t(key, **values)


def test_an_unexpected_error_has_no_words_of_its_own(t: Strings) -> None:
    """chat.ui.failures reports it and answers with its reference, never the error's text."""
    assert error_text(KeyError("a bug"), t) is None
    assert "a1b2c3d4" in t("unexpected_error", reference="a1b2c3d4")


def test_the_context_meter_and_its_warning_in_both_languages() -> None:
    for language in ("en-US", "zh-CN"):
        t = strings_for(language)
        meter = context_note(
            end("stop", prompt=1000, tokens=200), t, context=4096, reply_budget=1024
        )
        assert meter == t("context", used=1200, limit=4096, percent=29)
        near = context_note(
            end("stop", prompt=2300, tokens=200), t, context=4096, reply_budget=1024
        )
        assert near == t("context_near_limit", percent=81, used=2500, room=3072)
        full = context_note(
            end("stop", prompt=3000, tokens=900), t, context=4096, reply_budget=1024
        )
        assert "100%" in full


def test_a_place_in_line_and_its_wait_in_both_languages() -> None:
    english, chinese = strings_for("en-US"), strings_for("zh-CN")
    places = [line_text(Place(n, None), english).split(".")[0] for n in (1, 2, 3, 4, 11, 12, 21)]
    assert places == [
        f"⏳ In line: {p}" for p in ["1st", "2nd", "3rd", "4th", "11th", "12th", "21st"]
    ]
    assert line_text(Place(3, 3.2), english).startswith("⏳ In line: 3rd, about 4 s.")
    assert line_text(Place(3, 3.2), chinese).startswith("⏳ 排队中：第 3 位，约 4 秒。")
    assert line_text(Place(1, 0.01), chinese).startswith("⏳ 排队中：第 1 位，约 1 秒。")
    assert line_text(Place(12, None), chinese).startswith("⏳ 排队中：第 12 位。")
