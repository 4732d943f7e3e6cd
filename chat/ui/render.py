"""What the chat shows, as pure functions of the engine's state and the chat's language.

No Chainlit calls and no I/O here: each function takes the ``Strings`` of the chat's
language (``chat.words``) and returns text, so every word a user reads is unit-tested.
"""

from __future__ import annotations

import math
from typing import Any

from engine import (
    EngineState,
    EngineStatus,
    ReplyEnd,
    ReplyStats,
)

from ..access.turns import Place
from ..words import Strings
from .markdown import fix_cjk_emphasis, protect_dollars

__all__ = [
    "context_note",
    "engine_notes",
    "final_reply",
    "footer",
    "footer_notes",
    "loading_text",
    "time_split",
]


def loading_text(status: EngineStatus, t: Strings) -> str:
    """The loading notice: the download's bytes while the model's files are fetched."""
    seconds = round(status.elapsed_s)
    download = status.download
    if download is None or not download.total_bytes:
        return t("loading", seconds=seconds)
    mb = 1_000_000
    return t(
        "downloading",
        done=f"{download.done_bytes / mb:,.1f}",
        total=f"{download.size_bytes / mb:,.1f}",
        rate=f"{download.rate / mb:,.1f}",
        seconds=seconds,
    )


def engine_notes(status: EngineStatus, t: Strings, *, loaded_now: bool, demo: bool) -> list[str]:
    """What a chat is told about the engine: failure, readiness, demo weights."""
    if status.state is EngineState.RESTARTING:
        return [t("restarting")]
    if status.state is not EngineState.READY:
        return [t("failed", reason=status.reason or status.state.value)]
    notes = [t("ready", seconds=round(status.elapsed_s))] if loaded_now else []
    if demo:
        notes.append(t("demo_model"))
    return notes


NEAR_LIMIT = 0.8  # of the prompt's room: from here a chat is told its oldest turns will go


def context_note(end: ReplyEnd, t: Strings, *, context: int, reply_budget: int) -> str:
    """How much of the model's context the chat fills after this reply (its prompt and
    reply, counted with the real tokenizer and chat template): a meter, or a warning once
    the next prompts near the room left beside a reply (past it, old turns are left out)."""
    used = end.stats.prompt_tokens + end.stats.reply_tokens
    room = max(context - reply_budget, 1)
    if used >= NEAR_LIMIT * room:
        return t(
            "context_near_limit", percent=min(100, round(100 * used / room)), used=used, room=room
        )
    return t("context", used=used, limit=context, percent=round(100 * used / context))


def footer_notes(
    end: ReplyEnd | None,
    t: Strings,
    *,
    reply_budget: int,
    lost: bool = False,
    context: int | None = None,
    waited_s: float = 0.0,
) -> list[str]:
    """Notes on how the reply ended, and its stats (``lost``: it was stopped because the
    chat's connection dropped; ``context``: the model's context in tokens, for the meter;
    ``waited_s``: its message's time in the app's line, for where its time went)."""
    if end is None:
        return []
    notes = []
    if end.finish_reason == "length":
        notes.append(t("cut_by_length", max_tokens=reply_budget))
    elif end.finish_reason == "abort":
        notes.append(t("stopped_connection_lost" if lost else "stopped"))
    if end.dropped_turns:
        notes.append(t("dropped_turns", count=end.dropped_turns))
    stats = end.stats
    notes.append(
        t(
            "stats",
            tokens=stats.reply_tokens,
            ttft_ms="-" if stats.ttft_s is None else f"{stats.ttft_s * 1000:.0f}",
            speed=f"{stats.tokens_per_s:.1f}",
            prompt=stats.prompt_tokens,
        )
    )
    if stats.engine is not None:
        notes.append(time_split(stats, t, waited_s=waited_s))
    if context:
        notes.append(context_note(end, t, context=context, reply_budget=reply_budget))
    return notes


def time_split(stats: ReplyStats, t: Strings, *, waited_s: float) -> str:
    """Where the reply's time went, as the engine saw it: waiting (the app's line and the
    engine's queue), reading the prompt (with the share its prefix cache held), writing."""
    engine = stats.engine
    assert engine is not None
    return t(
        "time_split",
        waited=f"{waited_s + engine.queued_s:.1f}",
        reading=f"{engine.reading_s * 1000:.0f}",
        cached=round(100 * stats.cached_share),
        tokens=stats.reply_tokens,
        writing=f"{engine.writing_s:.1f}",
    )


def line_text(place: Place, t: Strings) -> str:
    """A waiting message's place in line and its wait, as "In line: 3rd, about 4 s"."""
    number, suffixes = place.number, t.table["ordinal_suffixes"]
    last = "other" if 10 <= number % 100 <= 20 else str(number % 10)  # 11th, 21st
    values = {"number": number, "suffix": suffixes.get(last, suffixes["other"])}
    if place.wait_s is None:
        return t("in_line", **values)
    return t("in_line_wait", seconds=max(1, math.ceil(place.wait_s)), **values)


def _as_footer(notes: list[str]) -> str:
    return "\n\n" + "\n".join(f"*{note}*  " for note in notes) if notes else ""


def footer(end: ReplyEnd | None, t: Strings, **sizes: Any) -> str:
    """``footer_notes`` as the reply's last lines, small and italic."""
    return _as_footer(footer_notes(end, t, **sizes))


def final_reply(text: str, notes: list[str]) -> str:
    """The reply as it stays in the chat: math and emphasis that render, then its
    ``footer_notes``."""
    return fix_cjk_emphasis(protect_dollars(text)) + _as_footer(notes)
