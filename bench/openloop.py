"""Open-loop measurement: visitors arrive at a rate (``bench.traffic``) whether or not the
server keeps up, as real ones do, and each rate is judged against a service-level
objective on the first token and the pace of the tokens after it.

Per path and rate: the offered and the achieved rate of conversations, the first token's
p50/p90/p99, the gaps between the frames a browser receives (p50/p99), the time per token
after the first (each reply's (last - first) / (tokens - 1); p50/p99), a turn's whole time,
and the goodput: the conversations whose every turn met the SLO. The capacity at the SLO
is the largest rate whose turns met it at p99, found by a sweep: the rate doubles until the
SLO fails, then two bisections between the last rate that met it and the first that did
not (vLLM's benchmark_serving and GuideLLM measure the same way).

Usage::

    results = await sweep("engine", run, Plan(duration_s=20), slo=Slo())
    capacity(results)        # the largest rate meeting the SLO, or None
"""

from __future__ import annotations

import asyncio
import functools
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from .measure import p99
from .traffic import Conversation, Traffic

__all__ = [
    "Clients",
    "OpenLoop",
    "RateResult",
    "Slo",
    "Talking",
    "Turn",
    "capacity",
    "run_rate",
    "sweep",
]

Run = Callable[[list[Conversation]], Awaitable[list[list["Turn"]]]]
Converse = Callable[[Conversation], Awaitable[list["Turn"]]]
CpuMeter = Callable[[], float]  # CPU seconds spent so far


class Talking(Protocol):
    """How visitors talk to a path (``bench.clients.Talker``)."""

    async def run(self, visitors: list[Conversation], start: float) -> list[list[Turn]]: ...


class Clients(Protocol):
    """Client processes that hold the visitors (``bench.clients.ClientPool``)."""

    async def run(self, talker: Any, visitors: list[Conversation]) -> list[list[Turn]]: ...

    def cpu_s(self) -> float: ...


@dataclass(frozen=True)
class Turn:
    """One message and its reply, as the client saw them (``time.monotonic()``)."""

    sent_at: float
    first_at: float | None
    ended_at: float | None
    frame_at: tuple[float, ...]  # each frame (or engine output) with text
    tokens: int
    error: str | None = None
    waited: bool = False  # it waited in the app's line (its place was shown)

    @property
    def answered(self) -> bool:
        return self.error is None and self.first_at is not None and self.ended_at is not None

    @property
    def ttft_s(self) -> float:
        assert self.first_at is not None
        return self.first_at - self.sent_at

    @property
    def per_token_s(self) -> float:
        assert self.first_at is not None and self.ended_at is not None
        return (self.ended_at - self.first_at) / max(1, self.tokens - 1)


@dataclass(frozen=True)
class Slo:
    ttft_p99_ms: float = 500.0
    itl_p99_ms: float = 100.0

    @classmethod
    def parse(cls, text: str) -> Slo:
        """``ttft_p99_ms=500,itl_p99_ms=100`` (either may be left out)."""
        values = dict(part.split("=", 1) for part in text.split(",") if part.strip())
        return cls(**{key.strip(): float(value) for key, value in values.items()})

    def met_by(self, turn: Turn) -> bool:
        return (
            turn.answered
            and turn.ttft_s * 1000 <= self.ttft_p99_ms
            and turn.per_token_s * 1000 <= self.itl_p99_ms
        )


@dataclass(frozen=True)
class OpenLoop:
    """What each rate's run looks like; ``rates``: those to run, or none for the sweep."""

    duration_s: float = 20.0
    turns: int = 2
    think_s: float = 2.0
    reply_median: int = 256
    reply_max: int = 1024
    reply_sigma: float = 0.6
    rates: tuple[float, ...] = ()
    first_rate: float = 2.0
    warm_up_s: float = 5.0  # arrivals at the first rate before it, not measured (0: none)
    slo: Slo = field(default_factory=Slo)
    system_prompt: str | None = None  # the app's, for the settings panel of its chats
    profile_to: Path | None = None  # py-spy on the app paths' processes, folded stacks here
    profile_paths: tuple[str, ...] = ()  # only these paths' (none named: every app path's)
    clients: Clients | None = None  # None: the visitors in the bench's own event loop

    def profiles(self, path: str) -> bool:
        """Whether py-spy watches ``path``'s processes."""
        return self.profile_to is not None and path in (self.profile_paths or (path,))

    def runner(self, talker: Talking) -> Run:
        """Each rate's visitors through ``talker``, from the client processes if any."""
        if self.clients is not None:
            return functools.partial(self.clients.run, talker)
        return lambda visitors: talker.run(visitors, time.monotonic() + 0.2)

    def traffic(self, rate: float) -> Traffic:
        return Traffic(rate, self.duration_s, self.turns, self.think_s, self.reply_median,
                       self.reply_max, reply_sigma=self.reply_sigma)  # fmt: skip


@dataclass(frozen=True)
class RateResult:
    path: str
    offered_rate: float  # conversations a second
    achieved_rate: float
    conversations: int
    turns: int
    failed_turns: int
    ttft_p50_ms: float
    ttft_p90_ms: float
    ttft_p99_ms: float
    frame_gap_p50_ms: float
    frame_gap_p99_ms: float
    itl_p50_ms: float
    itl_p99_ms: float
    turn_p50_ms: float
    turn_p99_ms: float
    goodput: float  # the share of conversations whose every turn met the SLO
    meets_slo: bool
    waited_turns: int = 0  # answered turns that waited in the app's line first
    admitted_ttft_p99_ms: float = float("nan")  # the first token of those that did not
    waited_ttft_p50_ms: float = float("nan")  # and of those that did: their wait, mostly
    waited_ttft_p99_ms: float = float("nan")
    app_cores: float = float("nan")  # the path's CPU seconds a second while the rate ran
    client_cores: float = float("nan")  # and the client processes'

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ms(values: Sequence[float], q: int) -> float:
    if not values:
        return float("nan")
    if q == 50:
        return round(statistics.median(values) * 1000, 1)
    if q == 99:
        return round(p99(list(values)) * 1000, 1)
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1] * 1000, 1)


def summarise(path: str, rate: float, talks: list[list[Turn]], slo: Slo) -> RateResult:
    turns = [turn for talk in talks for turn in talk]
    done = [turn for turn in turns if turn.answered]
    ttfts = [turn.ttft_s for turn in done]
    itls = [turn.per_token_s for turn in done]
    gaps = [b - a for t in done for a, b in zip(t.frame_at, t.frame_at[1:], strict=False)]
    whole = [turn.ended_at - turn.sent_at for turn in done if turn.ended_at]
    span = max((t.ended_at for t in done if t.ended_at), default=0.0) - min(
        (t.sent_at for t in turns), default=0.0
    )
    good = sum(all(slo.met_by(turn) for turn in talk) for talk in talks)
    ttft_p99, itl_p99 = _ms(ttfts, 99), _ms(itls, 99)
    waited = [turn.ttft_s for turn in done if turn.waited]
    admitted = [turn.ttft_s for turn in done if not turn.waited]
    line = (len(waited), _ms(admitted, 99), _ms(waited, 50), _ms(waited, 99))
    return RateResult(
        path, rate, round(len(talks) / span, 3) if span > 0 else 0.0, len(talks), len(turns),
        len(turns) - len(done), _ms(ttfts, 50), _ms(ttfts, 90), ttft_p99, _ms(gaps, 50),
        _ms(gaps, 99), _ms(itls, 50), itl_p99, _ms(whole, 50), _ms(whole, 99),
        round(good / len(talks), 3) if talks else 0.0,
        len(done) == len(turns) and ttft_p99 <= slo.ttft_p99_ms and itl_p99 <= slo.itl_p99_ms,
        *line,
    )  # fmt: skip


async def run_rate(
    converse: Converse, visitors: list[Conversation], start: float | None = None
) -> list[list[Turn]]:
    """Every conversation, each at its moment from ``start`` (``time.monotonic()``, the
    machine's clock: processes share it; default: now)."""
    start = time.monotonic() + 0.2 if start is None else start

    async def one(visitor: Conversation) -> list[Turn]:
        await asyncio.sleep(max(0.0, start + visitor.start_s - time.monotonic()))
        return await converse(visitor)

    return list(await asyncio.gather(*(one(v) for v in visitors)))


async def sweep(
    path: str, run: Run, plan: OpenLoop, app_cpu: CpuMeter | None = None
) -> list[RateResult]:
    """The rates of ``plan`` (or the sweep for the capacity at its SLO), each one run, with
    the CPU the path (``app_cpu``) and the client processes spent while it ran."""
    results: list[RateResult] = []
    meters = [app_cpu, plan.clients.cpu_s if plan.clients else None]

    async def at(rate: float) -> RateResult:
        before, started = [m() if m else 0.0 for m in meters], time.monotonic()
        talks = await run(plan.traffic(rate).conversations())
        took = time.monotonic() - started
        app, client = (
            round((meter() - spent) / took, 2) if meter else float("nan")
            for meter, spent in zip(meters, before, strict=True)
        )
        result = replace(summarise(path, rate, talks, plan.slo), app_cores=app, client_cores=client)
        print(f"{path} at {rate:g}/s: {result.as_dict()}", file=sys.stderr, flush=True)
        failed = sorted({str(t.error) for talk in talks for t in talk if not t.answered})
        if failed:  # why turns failed, each cause once
            print(f"{path} at {rate:g}/s: failed turns: {failed[:5]}", file=sys.stderr)
        results.append(result)
        return result

    first = plan.rates[0] if plan.rates else plan.first_rate
    if plan.warm_up_s > 0:  # a path's first rate would also pay its first batches' shapes
        warm = replace(plan, duration_s=plan.warm_up_s).traffic(first)
        await run(warm.conversations())
        print(f"{path}: warmed up at {first:g}/s for {plan.warm_up_s:g} s", file=sys.stderr)
    if plan.rates:
        for rate in plan.rates:
            await at(rate)
        return results
    good, bad, rate = 0.0, None, plan.first_rate
    for _ in range(7):  # doubling until the SLO fails
        if not (await at(rate)).meets_slo:
            bad = rate
            break
        good, rate = rate, rate * 2
    for _ in range(2 if bad is not None else 0):  # then two bisections
        middle = round((good + bad) / 2, 2) if good else round(bad / 2, 2)
        if (await at(middle)).meets_slo:
            good = middle
        else:
            bad = middle
    return sorted(results, key=lambda r: r.offered_rate)


def capacity(results: Sequence[RateResult], path: str) -> float | None:
    """The largest offered rate of ``path`` that met the SLO (None: not even the first)."""
    met = [r.offered_rate for r in results if r.path == path and r.meets_slo]
    return max(met) if met else None
