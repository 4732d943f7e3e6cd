"""Loading the settings: the settings file, misspelled names, and one-line errors.

Usage::

    settings = load_settings()      # SettingsError: one line naming the variable and the fix
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from dotenv import dotenv_values
from pydantic import ValidationError

from settings.profiles import PROFILE_FIELDS
from settings.settings import ENV_FILE, ENV_PREFIX, Settings, SettingsError, env_name
from settings.urls import redact_setting

__all__ = ["ENV_FILE_VARIABLE", "load_settings", "settings_file"]

ENV_FILE_VARIABLE = "ERNIE_ENV_FILE"  # where the settings file is; not itself a setting
SECRET_FIELDS = ("auth_proxy_secret", "ops_token", "remote_api_key")


def settings_file() -> Path:
    """The settings file: ``ERNIE_ENV_FILE`` if set (it must exist), else ``./.env`` if any."""
    named = os.environ.get(ENV_FILE_VARIABLE)
    if named is None:
        return Path(ENV_FILE)
    if not Path(named).is_file():
        raise SettingsError(
            f"{ENV_FILE_VARIABLE}={named!r}: no such file (create it, give its full path, "
            f"or unset {ENV_FILE_VARIABLE} to read ./{ENV_FILE})"
        )
    return Path(named)


def _given_names(env_file: Path) -> dict[str, str]:
    """Every ERNIE_* name given, from the environment and the settings file."""
    in_file = dotenv_values(env_file) if env_file.is_file() else {}
    given = {k.upper(): v for k, v in in_file.items() if v is not None} | dict(os.environ)
    return {k: v for k, v in given.items() if k.upper().startswith(ENV_PREFIX)}


def check_unknown_names(env_file: Path) -> None:
    """Refuse a misspelled ERNIE_* variable instead of silently ignoring it."""
    known = {env_name(name) for name in Settings.model_fields} | {ENV_FILE_VARIABLE}
    for name, value in sorted(_given_names(env_file).items()):
        if name.upper() in known:
            continue
        close = difflib.get_close_matches(name.upper(), known, n=1)
        fix = f"did you mean {close[0]}?" if close else "see .env.example for the names"
        raise SettingsError(f"{name}={redact_setting(value)!r} is not a setting: {fix}")


def one_line(exc: ValidationError) -> str:
    """The first validation error as ``ERNIE_X='value': why (fix)``."""
    error = exc.errors(include_url=False)[0]
    if not error["loc"]:  # a check across fields: its message is the whole line
        return str(error["msg"]).removeprefix("Value error, ")
    field = str(error["loc"][0])
    value: Any = error.get("input")
    if field in SECRET_FIELDS:
        value = "***"
    elif isinstance(value, str) and "@" in value:
        value = redact_setting(value)  # a URL's password stays out of terminals
    default = Settings.model_fields[field].default
    if field in PROFILE_FIELDS:
        fix = "unset it for the profile's value"
    elif default is None:
        fix = "unset it for the default"
    else:
        fix = f"the default is {default!r}"
    why = str(error["msg"]).removeprefix("Value error, ")
    return f"{env_name(field)}={value!r}: {why[:1].lower()}{why[1:]} ({fix})"


def load_settings(**overrides: Any) -> Settings:
    """Read and validate the settings; raise SettingsError with a one-line fix."""
    env_file = settings_file()
    check_unknown_names(env_file)
    try:
        return Settings(_env_file=env_file, **overrides)  # type: ignore[call-arg]
    except ValidationError as exc:
        raise SettingsError(one_line(exc)) from None
