"""The settings reference (docs/settings.md), generated from ``Settings``' fields.

Usage::

    python -m settings.reference > docs/settings.md   # a test keeps the file in sync
"""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr
from pydantic.fields import FieldInfo

from settings.profiles import PROFILE_FIELDS
from settings.settings import Settings, env_name

__all__ = ["render"]

INTRO = """\
# Settings

Generated from `settings/settings.py` by `python -m settings.reference`; a test keeps
this file in sync. Every setting comes from an `ERNIE_*` environment variable or a `.env`
file in the working directory (another file: `ERNIE_ENV_FILE=/path`); `.env.example` lists
them with comments. Unset means the profile's, the model's or vLLM's own default.
`python -m engine check` prints each value and where it came from (environment, the file,
the profile, the backend, default); a bad value or a misspelled name stops the app at
start with one line naming the variable and the fix. Profiles, the checks before loading
and the failures' lines are in [operations.md](operations.md).

| variable | default | meaning |
|---|---|---|
"""


def _default(name: str, field: FieldInfo) -> str:
    if name in PROFILE_FIELDS:
        return "the profile's"
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, Path | str | int | float):
        return f"`{value}`"
    return f"`{value!r}`"


def _meaning(field: FieldInfo) -> str:
    text = " ".join((field.description or "").split())
    return text.replace("|", "\\|")


def render() -> str:
    """The whole reference, one row a field, in the order ``Settings`` declares them."""
    rows = [
        f"| `{env_name(name)}` | {_default(name, field)} | {_meaning(field)} |"
        for name, field in Settings.model_fields.items()
    ]
    return INTRO + "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(render(), end="")
