"""Prompts: a conversation rendered with the model's own chat template, as token ids.

Usage::

    builder = PromptBuilder(tokenizer, max_model_len=16384)
    prompt = builder.build(history, "你好", system_prompt=text, reply_budget=1024)
    prompt.token_ids, prompt.dropped_turns

Two things a plain ``apply_chat_template(..., tokenize=True)`` gets wrong for a chat app:

* Text a user types is tokenized like any other text, so a typed ``<|end_of_sentence|>``
  would become the real end-of-turn token. Here only the template's own special tokens
  become special ids; message text is tokenized with special-token splitting on.
* A long history overflows the context. Here the oldest turns are dropped until the
  prompt plus the reply budget fits, keeping the system prompt and the newest message.

Every message re-renders its whole conversation, on the event loop that carries every
chat's tokens. The text between special tokens is tokenized once and remembered
(``RunCache``), so a message costs the tokens of what is new, not of the whole chat.
"""

from __future__ import annotations

import re
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .errors import PromptTooLongError

__all__ = ["Prompt", "PromptBuilder", "RunCache", "Turn"]

# Private-use characters stand in for message text while the template is rendered.
_MARK = "\ue000{}\ue001"
_MARK_RE = re.compile("\ue000(\\d+)\ue001")


@dataclass(frozen=True)
class Turn:
    """One message of a conversation."""

    role: Literal["user", "assistant"]
    content: str


@dataclass(frozen=True)
class Prompt:
    """Token ids for the engine, and how many of the oldest turns were left out."""

    token_ids: list[int]
    dropped_turns: int


class RunCache:
    """Token ids of texts tokenized before, newest kept, up to ``max_chars`` of text.

    Tokenizing a text does not depend on what surrounds it here (each run is encoded on
    its own), so a remembered result is exact. Ids are kept as machine ints (8 bytes a
    token): the default budget holds a few hundred long chats in ~20 MB.
    """

    def __init__(self, tokenizer: Any, max_chars: int = 2_000_000) -> None:
        self.tokenizer = tokenizer
        self.max_chars = max_chars
        self._ids: OrderedDict[str, array[int]] = OrderedDict()
        self._chars = 0

    def encode(self, texts: Sequence[str]) -> list[array[int]]:
        """Token ids of each text, as typed text (special-token splitting on)."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._ids))
        if missing:
            encoded = self.tokenizer(missing, add_special_tokens=False, split_special_tokens=True)
            for text, ids in zip(missing, encoded["input_ids"], strict=True):
                self._remember(text, array("q", ids))
        found = [self._ids[text] for text in texts]
        for text in texts:
            self._ids.move_to_end(text)
        return found

    def _remember(self, text: str, ids: array[int]) -> None:
        self._ids[text] = ids
        self._chars += len(text)
        while self._chars > self.max_chars and len(self._ids) > 1:
            old, _ = self._ids.popitem(last=False)
            self._chars -= len(old)


class PromptBuilder:
    """Renders conversations with a tokenizer's chat template into token ids that fit."""

    def __init__(self, tokenizer: Any, *, max_model_len: int) -> None:
        self.tokenizer = tokenizer
        self.max_model_len = max_model_len
        added = [t.content for t in tokenizer.added_tokens_decoder.values()]
        longest_first = sorted(set(added), key=len, reverse=True)
        self._special_re = re.compile("|".join(map(re.escape, longest_first)) or "(?!)")
        self._runs = RunCache(tokenizer)

    def count_tokens(self, text: str) -> int:
        """How many tokens ``text`` is as typed message text."""
        return len(self._runs.encode([text])[0])

    def encode(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """Token ids of ``messages`` with the generation prompt; typed text stays plain."""
        skeleton = self.tokenizer.apply_chat_template(
            [{"role": m["role"], "content": _MARK.format(i)} for i, m in enumerate(messages)],
            tokenize=False,
            add_generation_prompt=True,
        )

        def fill(mark: re.Match[str]) -> str:
            return messages[int(mark.group(1))]["content"]

        # The text between the template's special tokens, new runs encoded in one call.
        runs = [_MARK_RE.sub(fill, run) for run in self._special_re.split(skeleton)]
        specials = [
            self.tokenizer.convert_tokens_to_ids(token)
            for token in self._special_re.findall(skeleton)
        ]
        ids: list[int] = []
        for run_ids, special in zip(self._runs.encode(runs), [*specials, None], strict=True):
            ids += run_ids
            if special is not None:
                ids.append(special)
        return ids

    def build(
        self,
        history: Sequence[Turn],
        user_text: str,
        *,
        system_prompt: str,
        reply_budget: int,
    ) -> Prompt:
        """The newest message after as much of ``history`` as fits with ``reply_budget``."""
        limit = self.max_model_len - reply_budget
        head = [{"role": "system", "content": system_prompt}] if system_prompt else []
        tail = [{"role": "user", "content": user_text}]
        turns = [{"role": t.role, "content": t.content} for t in history]
        starts = _turn_starts(turns)

        def encode_from(start: int) -> list[int]:
            return self.encode(head + turns[start:] + tail)

        first = starts[0] if starts else len(turns)
        whole = encode_from(first)
        if len(whole) <= limit:  # the usual case: one render
            return Prompt(token_ids=whole, dropped_turns=first)
        # Keeping fewer turns never makes the prompt longer: binary-search the first
        # user turn to keep, so a long history costs log(n) renders, not n.
        lo, hi = 1, len(starts)  # candidates: starts[1..], or len(turns) (history dropped)
        best: list[int] | None = None
        best_start = 0
        while lo <= hi:
            mid = (lo + hi) // 2
            start = starts[mid] if mid < len(starts) else len(turns)
            ids = encode_from(start)
            if len(ids) <= limit:
                best, best_start, hi = ids, start, mid - 1
            else:
                lo = mid + 1
        if best is None:
            raise PromptTooLongError(len(encode_from(len(turns))), limit)
        return Prompt(token_ids=best, dropped_turns=best_start)


def _turn_starts(turns: Sequence[dict[str, str]]) -> list[int]:
    """Indexes where history may start: each user turn, so user/assistant pairs stay whole."""
    return [i for i, t in enumerate(turns) if t["role"] == "user"]
