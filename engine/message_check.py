"""A chat message as the prompt may take it: cleaned, or refused with the reason.

Cleaning keeps everything a person could mean (newlines, tabs, any script, emoji with
their joiners and variation selectors) and drops what no one types: control characters,
and lone surrogates (half of a UTF-16 pair: JSON can carry one, no tokenizer can encode
it), which become U+FFFD. A message with nothing visible left is empty. Text that
imitates special tokens or chat roles stays the user's text: ``engine.prompt`` tokenizes
typed text without special tokens, so it cannot end a turn or open a new one.
"""

from __future__ import annotations

import re

from .errors import MessageRefusedError

__all__ = ["CheckedText", "check_message", "clean_message"]

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def clean_message(text: str) -> str:
    """``text`` with one kind of line break, no control characters and no lone surrogates."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", _LONE_SURROGATE.sub("\ufffd", text))


def _has_visible_text(text: str) -> bool:
    return any(char.isprintable() and not char.isspace() for char in text)


class CheckedText(str):
    """A message that passed ``check_message``: cleaned, not empty, within the limit.

    The web app checks a message once, at its front door, and passes this on; the reply
    path takes it as it is and checks plain ``str`` (a shell's, the bench's)."""

    __slots__ = ()


def check_message(text: str, *, max_chars: int) -> CheckedText:
    """The cleaned message; ``MessageRefusedError`` when it is empty or too long."""
    if isinstance(text, CheckedText):
        return text
    if len(text) > max_chars:  # before any work on it
        raise MessageRefusedError("too_many_chars", len(text), max_chars)
    cleaned = clean_message(text)
    if not _has_visible_text(cleaned):
        raise MessageRefusedError("empty", 0, 1)
    return CheckedText(cleaned)
