"""What a reply stream yields, and the buffer that turns token deltas into few, larger chunks.

A reply is a run of ``TextChunk`` events and one closing ``ReplyEnd``. ``TokenBuffer``
is pure logic (no I/O, no clock of its own) so it can be tested on its own: it decodes
only when a flush is due, which also saves the per-token decoding work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .decode import IncrementalDecoder

__all__ = [
    "EngineTimes",
    "FinishReason",
    "ReplyEnd",
    "ReplyStats",
    "StreamEvent",
    "TextChunk",
    "TokenBuffer",
]

FinishReason = Literal["stop", "length", "abort"]


@dataclass(frozen=True)
class TextChunk:
    """Text to append to the reply."""

    text: str


@dataclass(frozen=True)
class EngineTimes:
    """Where a reply's time went, as the engine saw it (vLLM's own timestamps of the
    request in its core): waiting in its queue, reading the prompt (its prefill, with the
    tokens its prefix cache already held), writing (first token to last)."""

    queued_s: float
    reading_s: float
    writing_s: float
    cached_tokens: int


@dataclass(frozen=True)
class ReplyStats:
    """Numbers about one reply."""

    prompt_tokens: int
    reply_tokens: int
    ttft_s: float | None  # submit to first token; None when no token came
    duration_s: float  # submit to end
    engine: EngineTimes | None = None  # None: the backend gives no timestamps (remote)

    @property
    def spent_tokens(self) -> int:
        """What the reply cost, as a visitor's daily tokens count it: its prompt and reply."""
        return self.prompt_tokens + self.reply_tokens

    @property
    def cached_share(self) -> float:
        """The prompt's share read from the prefix cache (0 when not known)."""
        if self.engine is None or not self.prompt_tokens:
            return 0.0
        return min(1.0, self.engine.cached_tokens / self.prompt_tokens)

    @property
    def tokens_per_s(self) -> float:
        """Generation speed after the first token (what a reader sees scroll by)."""
        if self.ttft_s is None or self.reply_tokens < 2:
            return 0.0
        generating = self.duration_s - self.ttft_s
        return (self.reply_tokens - 1) / generating if generating > 0 else 0.0

    def summary(self) -> str:
        ttft = "-" if self.ttft_s is None else f"{self.ttft_s * 1000:.0f} ms"
        return (
            f"{self.reply_tokens} tokens · first token {ttft} · "
            f"{self.tokens_per_s:.1f} tokens/s · prompt {self.prompt_tokens} tokens"
        )


@dataclass(frozen=True)
class ReplyEnd:
    """The last event of a reply."""

    finish_reason: FinishReason
    stats: ReplyStats
    dropped_turns: int = 0  # oldest turns left out so the prompt fits


StreamEvent = TextChunk | ReplyEnd


class TokenBuffer:
    """Collects token ids and releases decoded text at most once per ``interval_s``.

    The first text goes out at once (time to first token is what users feel most);
    after that, text waits until the interval since the last flush has passed.

    Usage::

        buffer = TokenBuffer(decoder, interval_s=0.05)
        text = buffer.push(ids, now=time.monotonic())   # "" while holding
        rest = buffer.drain()                            # at the end, always
    """

    def __init__(self, decoder: IncrementalDecoder, *, interval_s: float) -> None:
        self._decoder = decoder
        self._interval_s = interval_s
        self._next_flush = float("-inf")

    def push(self, token_ids: Sequence[int], *, now: float) -> str:
        self._decoder.push(token_ids)
        if now < self._next_flush:
            return ""
        text = self._decoder.take()
        if text:
            self._next_flush = now + self._interval_s
        return text

    def wait_s(self, now: float) -> float:
        """Seconds until the next flush is due: tokens arriving before then only wait."""
        return max(0.0, self._next_flush - now)

    def drain(self) -> str:
        return self._decoder.finish()
