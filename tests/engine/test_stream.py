"""The decoder and the buffer on their own: split characters, prompt text, flush timing."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from engine.decode import IncrementalDecoder
from engine.stream import ReplyStats, TokenBuffer


@pytest.fixture(scope="module")
def byte_tokenizer(byte_model: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(byte_model)


def ids_of(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def test_chinese_is_split_into_byte_tokens(byte_tokenizer: Any) -> None:
    # The premise of the tests below: each character is several tokens.
    assert len(ids_of(byte_tokenizer, "中文")) == 6


def test_split_characters_never_show_replacement(byte_tokenizer: Any) -> None:
    prompt = ids_of(byte_tokenizer, "User: hi\nAssistant: ")
    reply = ids_of(byte_tokenizer, "你好，世界！ok 😀")
    decoder = IncrementalDecoder(byte_tokenizer, prompt)
    pieces = []
    for token in reply:
        decoder.push([token])
        pieces.append(decoder.take())
    pieces.append(decoder.finish())
    assert all("\ufffd" not in p for p in pieces)
    assert "".join(pieces) == "你好，世界！ok 😀"
    assert sum(1 for p in pieces if p) >= 6  # text went out as characters completed


def test_prompt_ending_inside_a_character_never_leaks(byte_tokenizer: Any) -> None:
    prompt = ids_of(byte_tokenizer, "User: 写字\nAssistant: 中")[:-1]  # ends mid-character
    decoder = IncrementalDecoder(byte_tokenizer, prompt)
    decoder.push(ids_of(byte_tokenizer, "文字"))
    first = decoder.take()
    assert first == "文字"  # no prompt text, no U+FFFD


def test_incomplete_last_character_is_dropped_at_the_end(byte_tokenizer: Any) -> None:
    decoder = IncrementalDecoder(byte_tokenizer, [])
    decoder.push(ids_of(byte_tokenizer, "好")[:2])
    assert decoder.take() == ""
    assert decoder.finish() == ""


def test_special_tokens_are_not_shown(byte_tokenizer: Any) -> None:
    decoder = IncrementalDecoder(byte_tokenizer, [])
    sep = byte_tokenizer.convert_tokens_to_ids("<|end_of_sentence|>")
    decoder.push([*ids_of(byte_tokenizer, "ok"), sep])
    assert decoder.take() + decoder.finish() == "ok"


def test_buffer_flushes_first_text_at_once_then_per_interval(byte_tokenizer: Any) -> None:
    reply = ids_of(byte_tokenizer, "abcdefghijklmnopqrstuvwxyz" * 4)
    buffer = TokenBuffer(IncrementalDecoder(byte_tokenizer, []), interval_s=0.05)
    flushes: list[tuple[float, str]] = []
    now = 0.0
    for token in reply:  # one token every 2 ms
        text = buffer.push([token], now=now)
        if text:
            flushes.append((now, text))
        now += 0.002
    rest = buffer.drain()
    assert flushes[0][0] == 0.0  # the first token is not held back
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(flushes)]
    assert all(gap >= 0.05 - 1e-9 for gap in gaps)
    assert len(flushes) <= now / 0.05 + 2  # far fewer flushes than tokens
    assert len(flushes) < len(reply) / 10
    assert "".join(t for _, t in flushes) + rest == "abcdefghijklmnopqrstuvwxyz" * 4


def test_buffer_says_how_long_until_the_next_flush(byte_tokenizer: Any) -> None:
    buffer = TokenBuffer(IncrementalDecoder(byte_tokenizer, []), interval_s=0.05)
    assert buffer.wait_s(10.0) == 0.0  # nothing flushed yet: the first text goes at once
    assert buffer.push(ids_of(byte_tokenizer, "a"), now=10.0) == "a"
    assert buffer.wait_s(10.02) == pytest.approx(0.03)
    assert buffer.push(ids_of(byte_tokenizer, "b"), now=10.02) == ""  # held
    assert buffer.wait_s(10.07) == 0.0  # due: the consumer does not sleep
    assert buffer.push(ids_of(byte_tokenizer, "c"), now=10.07) == "bc"


def test_zero_interval_flushes_every_delta(byte_tokenizer: Any) -> None:
    buffer = TokenBuffer(IncrementalDecoder(byte_tokenizer, []), interval_s=0)
    texts = [buffer.push([t], now=0.0) for t in ids_of(byte_tokenizer, "abc")]
    assert texts == ["a", "b", "c"]


def test_stats_speed_excludes_time_to_first_token() -> None:
    stats = ReplyStats(prompt_tokens=10, reply_tokens=101, ttft_s=0.5, duration_s=1.5)
    assert stats.tokens_per_s == pytest.approx(100.0)
    assert "101 tokens" in stats.summary() and "500 ms" in stats.summary()
    assert ReplyStats(10, 0, None, 0.1).tokens_per_s == 0.0
