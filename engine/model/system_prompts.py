"""The system prompts shipped in ``prompts/``, and ``ERNIE_SYSTEM_PROMPT`` resolved to text.

Usage::

    available_system_prompts()          # {"en": "...", "zh": "..."}
    resolve_system_prompt("zh")         # a name from prompts/, literal text, or "" for none
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from settings.settings import SettingsError, env_name

__all__ = ["PROMPTS_DIR", "available_system_prompts", "resolve_system_prompt"]

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"
_PROMPT_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


@functools.cache
def available_system_prompts(folder: Path = PROMPTS_DIR) -> dict[str, str]:
    """The system prompts shipped in ``prompts/``, by name (file name without ``.md``)."""
    return {p.stem: p.read_text(encoding="utf-8").strip() for p in sorted(folder.glob("*.md"))}


@functools.lru_cache(maxsize=64)
def resolve_system_prompt(value: str, folder: Path = PROMPTS_DIR) -> str:
    """``value`` is a prompt name from ``prompts/`` or literal text; empty means none."""
    if not value.strip():
        return ""
    prompts = available_system_prompts(folder)
    if value in prompts:
        return prompts[value]
    if _PROMPT_NAME.match(value):
        names = ", ".join(prompts) or "none"
        raise SettingsError(
            f"{env_name('system_prompt')}={value!r}: no such prompt in {folder} "
            f"(available: {names}; or give the prompt text itself)"
        )
    return value
