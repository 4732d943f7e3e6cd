"""Markdown that renders as the model meant it: emphasis in Chinese text, and dollar signs
that are money, not math; code left exactly as written.

CommonMark only closes ``**`` when the delimiter is "right-flanking": a closing ``**``
after punctuation must be followed by a space or punctuation. Chinese has no spaces, so
``**注意：**正文`` shows its asterisks. Moving the punctuation next to the delimiter
outside the span (``**注意**：正文``) renders bold in every CommonMark renderer, with the
same text.

With LaTeX on (``.chainlit/config.toml``), the page's math plugin pairs any two ``$`` of a
paragraph: "it costs $5, or $10" became math. ``protect_dollars`` keeps ``$$...$$`` and
an inline ``$...$`` whose inside starts and ends with a non-space on one line and is not
followed by a digit (Pandoc's rule, with no ``$`` inside), and escapes every other ``$``.

Code is never touched: markdown-it-py (CommonMark's reference rules) finds the
paragraphs, headings and list items whose inline text may hold emphasis, and the code
spans inside them; fenced and indented code blocks are not inline text at all.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator

from markdown_it import MarkdownIt
from markdown_it.token import Token

__all__ = ["fix_cjk_emphasis", "protect_dollars"]

_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1", re.S)
_PARSER = MarkdownIt("commonmark")
_MASK = 0x100000  # Supplementary Private Use Area-B: one stand-in character per code span
_DOLLARS = re.compile(r"(?<!\\)\$\$|(?<!\\)\$")


def _is_punct(char: str) -> bool:
    return unicodedata.category(char)[0] in "PS"


def _is_word(char: str) -> bool:
    """Neither space nor punctuation: what breaks flanking next to punctuation."""
    return bool(char) and not char.isspace() and not _is_punct(char)


def _fix_strong(text: str) -> str:
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


def _code_spans(source: str, inline: Token) -> Iterator[tuple[int, int]]:
    """Where the code spans markdown-it found in ``inline`` lie in ``source``, in order."""
    position = 0
    for child in inline.children or []:
        if child.type == "code_inline":
            start = source.find(child.markup, position)
            end = source.find(child.markup, start + len(child.markup))
            if start < 0 or end < 0:
                return
            position = end + len(child.markup)
            yield start, position


def _is_inline_math(text: str, start: int, end: int) -> bool:
    """Whether the ``$`` at ``start`` and at ``end`` hold inline math (Pandoc's rule)."""
    inside, after = text[start + 1 : end], text[end + 1 : end + 2]
    if not inside or "\n" in inside or inside[0].isspace() or inside[-1].isspace():
        return False
    return not after.isdigit()


def _fix_dollars(text: str) -> str:
    """Every ``$`` of ``text`` that opens or closes no math, escaped."""
    marks = [(m.start(), m.group()) for m in _DOLLARS.finditer(text)]
    kept: set[int] = set()
    index = 0
    while index < len(marks):
        start, mark = marks[index]
        if mark == "$$":  # display math: to the next $$, over lines
            close = next((j for j in range(index + 1, len(marks)) if marks[j][1] == "$$"), None)
        else:  # inline math: the very next $, by Pandoc's rule
            nxt = index + 1
            pairs = nxt < len(marks) and marks[nxt][1] == "$"
            close = nxt if pairs and _is_inline_math(text, start, marks[nxt][0]) else None
        if close is None:
            index += 1
            continue
        kept |= {index, close}
        index = close + 1
    for index in sorted(set(range(len(marks))) - kept, reverse=True):
        start, mark = marks[index]
        text = text[:start] + mark.replace("$", "\\$") + text[start + len(mark) :]
    return text


def _fix_inline(source: str, inline: Token, fix: Callable[[str], str]) -> str:
    """``source`` (one block's inline text) fixed, with its code spans masked meanwhile."""
    spans = list(_code_spans(source, inline))
    masked, pieces, last = [], [], 0
    for index, (start, end) in enumerate(spans):
        masked.append(source[last:start] + chr(_MASK + index))
        pieces.append(source[start:end])
        last = end
    fixed = fix("".join(masked) + source[last:])
    for index, piece in enumerate(pieces):
        fixed = fixed.replace(chr(_MASK + index), piece, 1)
    return fixed


def _fix_blocks(text: str, fix: Callable[[str], str]) -> str:
    """``fix`` applied to each block's inline text; code spans and code blocks untouched."""
    lines = text.splitlines(keepends=True)
    for token in _PARSER.parse(text):
        if token.type == "inline" and token.map:
            first, last = token.map
            source = "".join(lines[first:last])
            fixed = _fix_inline(source, token, fix)
            lines[first:last] = [fixed, *([""] * (last - first - 1))]
    return "".join(lines)


def fix_cjk_emphasis(text: str) -> str:
    """``text`` with CJK emphasis that renders; code spans and code blocks untouched."""
    if "**" not in text and "__" not in text:
        return text
    return _fix_blocks(text, _fix_strong)


def protect_dollars(text: str) -> str:
    """``text`` with its math kept and every other ``$`` escaped, outside code."""
    return _fix_blocks(text, _fix_dollars) if "$" in text else text
