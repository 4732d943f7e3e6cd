"""What one load (N chats at once) measured, and the CPU and memory of the process serving it."""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import psutil

__all__ = [
    "LoadResult",
    "Loads",
    "ProcessWatch",
    "ReplyTiming",
    "Round",
    "measure_loads",
    "p99",
    "summarise",
    "timed",
]


@dataclass(frozen=True)
class ReplyTiming:
    sent_at: float
    first_text_at: float
    ended_at: float
    frames: int  # websocket messages (or engine outputs) that carried text


@dataclass(frozen=True)
class Loads:
    """What each path is measured at: every number of ``chats`` at once, ``rounds`` times
    in a row (a longer window: one round at 256 chats lasts 1-3 s on an H200)."""

    chats: tuple[int, ...]  # ascending
    reply_tokens: int
    rounds: int = 1

    @property
    def warm_up(self) -> int:
        """The chats of the warm-up: the largest load, or 16 when only the open loop runs."""
        return self.chats[-1] if self.chats else 16


@dataclass(frozen=True)
class Round:
    """One load's replies, and the CPU seconds the serving processes spent on them."""

    replies: list[ReplyTiming]
    cpu_s: float


@dataclass(frozen=True)
class LoadResult:
    path: str
    chats: int
    reply_tokens: int
    ttft_p50_ms: float
    ttft_p99_ms: float
    chat_tokens_per_s_p50: float
    total_tokens_per_s: float
    frames_per_reply: float
    cpu_s: float  # of the serving process, during this load
    cpu_ms_per_token: float
    peak_rss_mib: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def p99(values: list[float]) -> float:
    """The 99th percentile (the one value, when there is one)."""
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def summarise(path: str, rounds: Sequence[Round], reply_tokens: int, peak_rss: int) -> LoadResult:
    """One load over its rounds: tokens over the rounds' summed wall time."""
    replies = [reply for one in rounds for reply in one.replies]
    ttfts = [r.first_text_at - r.sent_at for r in replies]
    speeds = [(reply_tokens - 1) / max(r.ended_at - r.first_text_at, 1e-9) for r in replies]
    wall = sum(_wall(one.replies) for one in rounds)
    tokens = reply_tokens * len(replies)
    cpu_s = sum(one.cpu_s for one in rounds)
    return LoadResult(
        path=path,
        chats=len(rounds[0].replies),
        reply_tokens=reply_tokens,
        ttft_p50_ms=round(statistics.median(ttfts) * 1000, 1),
        ttft_p99_ms=round(p99(ttfts) * 1000, 1),
        chat_tokens_per_s_p50=round(statistics.median(speeds), 1),
        total_tokens_per_s=round(tokens / wall, 1),
        frames_per_reply=round(sum(r.frames for r in replies) / len(replies), 1),
        cpu_s=round(cpu_s, 2),
        cpu_ms_per_token=round(cpu_s * 1000 / tokens, 3),
        peak_rss_mib=round(peak_rss / 2**20, 1),
    )


def _wall(replies: Sequence[ReplyTiming]) -> float:
    return max(r.ended_at for r in replies) - min(r.sent_at for r in replies)


class ProcessWatch:
    """CPU seconds between marks (summed), and the peak resident memory (of the largest),
    of one or more serving processes."""

    def __init__(self, *pids: int, interval_s: float = 0.05) -> None:
        self._processes = [psutil.Process(pid) for pid in pids]
        self._interval_s = interval_s
        self._peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _rss(self) -> int:
        return max(process.memory_info().rss for process in self._processes)

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                self._peak = max(self._peak, self._rss())
            except psutil.NoSuchProcess:
                return
            time.sleep(self._interval_s)

    def cpu_s(self) -> float:
        """CPU seconds of the processes and of all their children (an engine core, a
        group's workers, vLLM's API servers), as they stand now."""
        total = 0.0
        for root in self._processes:
            for process in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):  # a child that just ended
                    total += sum(process.cpu_times()[:2])
        return total

    def reset_peak(self) -> None:
        self._peak = self._rss()

    @property
    def peak_rss(self) -> int:
        return self._peak

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def timed(
    watch: ProcessWatch, load: Callable[[int], Awaitable[list[ReplyTiming]]]
) -> Callable[[int], Awaitable[Round]]:
    """``load`` as a round: with the CPU the watched processes spent during it."""

    async def one_round(chats: int) -> Round:
        before = watch.cpu_s()
        replies = await load(chats)
        return Round(replies, watch.cpu_s() - before)

    return one_round


async def measure_loads(
    path: str,
    loads: Loads,
    watch: ProcessWatch,
    one_round: Callable[[int], Awaitable[Round]],
) -> list[LoadResult]:
    """A warm-up at the largest load (not counted), then each load's rounds, with the peak
    memory of the watched processes."""
    await one_round(loads.warm_up)
    results = []
    for chats in loads.chats:
        watch.reset_peak()
        rounds = [await one_round(chats) for _ in range(loads.rounds)]
        results.append(summarise(path, rounds, loads.reply_tokens, watch.peak_rss))
    return results
