"""``python -m bench.counts``: what one count costs on each backend of the store
(``chat.counts``), beside the bucket kept in a dict that the rates were before it.

Per backend, in one invocation: a rate's check (``Rate.allow``: one transaction), a
message's admission and its end (``ReplyLine.admit`` + ``done``), each timed over N
calls from 256 visitors on one event loop; printed in microseconds a call, and the
ratio to the dict. PostgreSQL where ``--postgres URL`` is given (a local server: the
round trips are what it costs).

Usage::

    python -m bench.counts [--calls 20000] [--postgres postgresql://postgres@127.0.0.1:5432/x]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from chat.access.rates import LogThrottle, Rate
from chat.access.turns import ReplyLine
from chat.counts import open_store

VISITORS = 256


async def _rate_us(where: str, calls: int) -> float:
    store = open_store(where, owner="bench")
    rate = Rate(store, "events", per_minute=10**9)
    started = time.perf_counter()
    for n in range(calls):
        await rate.allow(f"address:10.0.{n % VISITORS}.1")
    took = time.perf_counter() - started
    await store.close()
    return took / calls * 1e6


async def _admission_us(where: str, calls: int) -> float:
    store = open_store(where, owner="bench")
    line = ReplyLine(store, core=0, max_replies=10**6, per_minute=10**6, slots=10**6, line=0)
    started = time.perf_counter()
    for n in range(calls):
        await line.done(await line.admit(f"address:10.0.{n % VISITORS}.1"))
    took = time.perf_counter() - started
    await store.close()
    return took / calls * 1e6


def _dict_us(calls: int) -> float:
    bucket = LogThrottle(per_minute=10**9, burst=10**9)
    started = time.perf_counter()
    for n in range(calls):
        bucket.allow(f"address:10.0.{n % VISITORS}.1")
    return (time.perf_counter() - started) / calls * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.counts", description=__doc__)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--postgres", help="a PostgreSQL URL to measure too")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        backends = {"memory": ":memory:", "file": str(Path(folder) / "limits.db")}
        if args.postgres:
            backends["postgresql"] = args.postgres
        base = _dict_us(args.calls)
        print(f"| backend | rate check µs | ratio to a dict ({base:.2f} µs) | admit+done µs |")
        print("|---|---:|---:|---:|")
        for name, where in backends.items():
            rate = asyncio.run(_rate_us(where, args.calls))
            admission = asyncio.run(_admission_us(where, args.calls // 4))
            print(f"| {name} | {rate:.1f} | {rate / base:.0f} x | {admission:.1f} |")


if __name__ == "__main__":
    main()
