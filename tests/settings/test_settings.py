"""Settings: env and .env reading, validation, and the one-line exit of ``check``."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.cli import main
from settings.loader import load_settings
from settings.settings import Settings, SettingsError, env_name
from testing.servers import ROOT


def run_check(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """``python -m engine check`` in this process: exit code, stdout, stderr."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code = main(["check"])
    out, err = capsys.readouterr()
    return code, out, err


def test_defaults_work_without_any_setting() -> None:
    settings = load_settings()
    assert settings.model == "baidu/ERNIE-4.5-0.3B-PT"
    assert settings.gpu_memory_utilization is None  # resolved per backend by the engine
    assert settings.stream_interval_ms == 50


def test_reads_environment_and_env_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("ERNIE_MAX_TOKENS=77\nERNIE_TOP_P=0.5\n")
    monkeypatch.setenv("ERNIE_TOP_P", "0.9")
    settings = load_settings()
    assert settings.max_tokens == 77
    assert settings.top_p == 0.9  # the environment wins over .env


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("ERNIE_TEMPERATURE", "abc", "valid number"),
        ("ERNIE_TOP_P", "1.5", "less than or equal to 1"),
        ("ERNIE_MAX_TOKENS", "0", "greater than or equal to 1"),
        ("ERNIE_GPU_MEMORY_UTILIZATION", "0", "greater than 0"),
        ("ERNIE_DTYPE", "int3", "auto"),
        ("ERNIE_ENFORCE_EAGER", "maybe", "valid boolean"),
    ],
)
def test_bad_value_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, words: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    message = str(info.value)
    assert message.startswith(f"{name}=")
    assert value in message and words in message
    assert "\n" not in message


def test_misspelled_name_is_an_error_with_a_suggestion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ERNIE_MAX_TOKEN", "5")
    with pytest.raises(SettingsError, match="did you mean ERNIE_MAX_TOKENS"):
        load_settings()


def test_misspelled_name_in_env_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("ERNIE_TEMPERATUR=0.3\n")
    with pytest.raises(SettingsError, match="ERNIE_TEMPERATURE"):
        load_settings()


def test_reply_budget_must_leave_room_for_the_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ERNIE_MAX_MODEL_LEN", "1024")
    monkeypatch.setenv("ERNIE_MAX_TOKENS", "1024")
    with pytest.raises(SettingsError, match="ERNIE_MAX_TOKENS=1024 leaves no room"):
        load_settings()


def test_settings_are_frozen() -> None:
    with pytest.raises(Exception, match="frozen"):
        Settings(_env_file=None).max_tokens = 3  # type: ignore[call-arg, misc]


def test_check_prints_settings_and_exits_0(
    demo_model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"ERNIE_MAX_TOKENS": "99", "ERNIE_MODEL": str(demo_model)}
    env |= {"ERNIE_KV_CACHE_GB": "0.5"}  # not a share of what the session's servers leave
    code, out, err = run_check(env, monkeypatch, capsys)
    assert code == 0, err
    assert "ERNIE_MAX_TOKENS" in out and "99  # environment" in out
    assert "ERNIE_MODEL" in out


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"ERNIE_TEMPERATURE": "hot"}, "ERNIE_TEMPERATURE"),
        ({"ERNIE_MAX_TOKNES": "10"}, "ERNIE_MAX_TOKNES"),
        ({"ERNIE_SYSTEM_PROMPT": "klingon"}, "ERNIE_SYSTEM_PROMPT"),
    ],
)
def test_check_exits_2_with_one_line(
    demo_model: Path,
    env: dict[str, str],
    name: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run_check({"ERNIE_MODEL": str(demo_model), **env}, monkeypatch, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert name in lines[0]


def test_each_value_knows_where_it_came_from(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text("ERNIE_TOP_P=0.5\n")
    monkeypatch.setenv("ERNIE_MAX_TOKENS", "77")
    origins = load_settings(temperature=0.3).origins
    assert origins["max_tokens"] == "environment"
    assert origins["top_p"] == ".env"
    assert origins["temperature"] == "given"
    assert origins["max_model_len"] == "profile balanced"
    assert origins["stream_interval_ms"] == "default"
    monkeypatch.setenv("ERNIE_PROFILE", "long-context")
    assert load_settings().origins["max_model_len"] == "profile long-context"
    capped = load_settings().with_values("fitted", max_model_len=4096)
    assert capped.max_model_len == 4096 and capped.origins["max_model_len"] == "fitted"


def test_env_example_lists_every_setting() -> None:
    example = (ROOT / ".env.example").read_text(encoding="utf-8")
    for field in Settings.model_fields:
        assert f"# ERNIE_{field.upper()}=" in example, field


def test_the_settings_reference_is_generated_from_the_settings() -> None:
    """docs/settings.md is ``python -m settings.reference``'s output, every field in it."""
    from settings.reference import render

    text = render()
    assert all(f"`{env_name(name)}`" in text for name in Settings.model_fields)
    assert (ROOT / "docs" / "settings.md").read_text(encoding="utf-8") == text, (
        "run: .venv/bin/python -m settings.reference > docs/settings.md"
    )
