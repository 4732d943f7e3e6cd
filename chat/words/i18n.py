"""The app's own words, in the chat's language, through Chainlit's translation loading.

The strings live under the key ``app`` of ``.chainlit/translations/<language>.json``
beside Chainlit's own. Chainlit's ``load_translation`` picks the file (exact language,
base language, regional variant, then English); a file without ``app`` strings (one of
Chainlit's own, for a language this app lacks) falls back to English.

Usage::

    t = strings_for("zh-CN")
    t("loading", seconds=3)        # this text, with its placeholders filled
    t.table["starters"]            # structured entries as they are
"""

from __future__ import annotations

import functools
from typing import Any

import chainlit as cl

from ..chainlit_door import config

__all__ = ["DEFAULT_LANGUAGE", "Strings", "chat_strings", "strings_for", "t"]

DEFAULT_LANGUAGE = "en-US"
LANGUAGES_KEPT = 32  # languages come from the client: keep a bounded number loaded


class Strings:
    """The app's strings for one language."""

    def __init__(self, table: dict[str, Any]) -> None:
        self.table = table

    def __call__(self, key: str, **values: Any) -> str:
        return str(self.table[key]).format(**values)


@functools.lru_cache(maxsize=LANGUAGES_KEPT)
def strings_for(language: str) -> Strings:
    """The app's strings for ``language`` (English where it has none)."""
    table = config.load_translation(language).get("app")
    if not table:
        table = config.load_translation(DEFAULT_LANGUAGE)["app"]
    return Strings(dict(table))


def chat_strings() -> Strings:
    """This chat's strings, in the browser's language."""
    language = getattr(cl.context.session, "language", None)  # a websocket's, not HTTP's
    return strings_for(language or DEFAULT_LANGUAGE)


def t(key: str, **values: Any) -> str:
    """This chat's text for ``key``."""
    return chat_strings()(key, **values)
