"""Markdown emphasis that renders in Chinese text.

CommonMark only closes ``**`` when the delimiter is "right-flanking": a closing ``**``
after punctuation must be followed by a space or punctuation. Chinese has no spaces, so
``**注意：**正文`` shows its asterisks. Moving the punctuation next to the delimiter
outside the span (``**注意**：正文``) renders bold in every CommonMark renderer, with the
same text.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["fix_cjk_emphasis"]

_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1", re.S)


def _is_punct(char: str) -> bool:
    return unicodedata.category(char)[0] in "PS"


def _is_word(char: str) -> bool:
    """Neither space nor punctuation: what breaks flanking next to punctuation."""
    return bool(char) and not char.isspace() and not _is_punct(char)


def fix_cjk_emphasis(text: str) -> str:
    """Move punctuation at the inner edges of ``**...**`` outside where CommonMark needs it."""

    def repair(match: re.Match[str]) -> str:
        delim, inner = match.group(1), match.group(2)
        before = text[match.start() - 1] if match.start() > 0 else ""
        after = text[match.end()] if match.end() < len(text) else ""
        lead = trail = ""
        if _is_word(after):
            stripped = inner.rstrip("".join(c for c in inner if _is_punct(c)))
            trail, inner = inner[len(stripped) :], stripped
        if _is_word(before):
            stripped = inner.lstrip("".join(c for c in inner if _is_punct(c)))
            lead, inner = inner[: len(inner) - len(stripped)], stripped
        if not inner:
            return match.group(0)
        return f"{lead}{delim}{inner}{delim}{trail}"

    return _STRONG.sub(repair, text)
