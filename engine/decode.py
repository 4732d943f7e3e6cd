"""Incremental decoding of a reply's token ids with the model's own tokenizer.

Byte-level tokenizers split one Chinese character into several tokens; decoding what has
arrived so far would show U+FFFD for the missing bytes. The decoder keeps such a tail
back until the character is complete.

It starts from a few prompt tokens, so the first reply token decodes as it does in
place (leading-space rules), and it never returns prompt text: vLLM's own fast
detokenizer returns the whole prompt when the prompt ends inside a character
(vLLM#48853), which is why the engine asks vLLM for token ids and decodes here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["IncrementalDecoder"]

REPLACEMENT = "\ufffd"
# Prompt tokens decoded with the reply: enough for any tokenizer's spacing rules.
CONTEXT_TOKENS = 6


class IncrementalDecoder:
    """Token ids in, text out; the text never ends inside a character.

    Usage::

        decoder = IncrementalDecoder(tokenizer, prompt_token_ids)
        decoder.push(new_ids)
        text = decoder.take()      # "" while a character is incomplete
        rest = decoder.finish()    # at the end; an incomplete last character is dropped
    """

    def __init__(self, tokenizer: Any, prompt_token_ids: Sequence[int]) -> None:
        self._tokenizer = tokenizer
        self._ids = list(prompt_token_ids[-CONTEXT_TOKENS:])
        self._prefix = 0  # start of the window decoded for context
        self._read = len(self._ids)  # end of what has been returned

    def push(self, token_ids: Sequence[int]) -> None:
        self._ids.extend(token_ids)

    def _decode(self, ids: Sequence[int]) -> str:
        return str(self._tokenizer.decode(ids, skip_special_tokens=True))

    def _pending(self) -> tuple[str, str]:
        """The text already returned in the window, and the window with the new tokens."""
        return self._decode(self._ids[self._prefix : self._read]), self._decode(
            self._ids[self._prefix :]
        )

    def take(self) -> str:
        """New complete text since the last call."""
        if self._read == len(self._ids):
            return ""
        done, now = self._pending()
        if len(now) <= len(done) or now.endswith(REPLACEMENT):
            return ""
        self._prefix, self._read = self._read, len(self._ids)
        return now[len(done) :]

    def finish(self) -> str:
        """The rest of the text at the end of a reply, less any incomplete last character."""
        if self._read == len(self._ids):
            return ""
        done, now = self._pending()
        self._prefix = self._read = len(self._ids)
        return now[len(done) :].rstrip(REPLACEMENT)
