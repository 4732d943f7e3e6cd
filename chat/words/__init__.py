"""The app's words: its strings in the chat's language (``chat.words.i18n``) and the
words for each error it expects (``chat.words.errors``). The bottom of chat/: every room
above may take words from here, and this room takes nothing from them."""

from __future__ import annotations

from .errors import error_text
from .i18n import DEFAULT_LANGUAGE, Strings, chat_strings, strings_for, t

__all__ = ["DEFAULT_LANGUAGE", "Strings", "chat_strings", "error_text", "strings_for", "t"]
