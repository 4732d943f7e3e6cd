"""The settings' names in the environment, and the one error a bad setting raises."""

from __future__ import annotations

__all__ = ["ENV_PREFIX", "SettingsError", "env_name"]

ENV_PREFIX = "ERNIE_"


class SettingsError(ValueError):
    """A setting is misspelled or has a bad value; the message is one line with the fix."""


def env_name(field: str) -> str:
    """The environment variable that sets ``field``."""
    return f"{ENV_PREFIX}{field.upper()}"
