"""``python -m bench.line``: what a long line costs the worker that holds it, before and
after a change, in one invocation.

A worker's waiting messages each look at the line (``chat.access.turns``) every
``LOOK_S`` on the worker's event loop, which also answers its HTTP requests. Here N
messages from 256 visitors wait behind one running reply, on one event loop, for a few
seconds, with ``ReplyLine`` as it is now and as it was at ``--before`` (a git revision, read
with ``git show``); meanwhile another thread asks the loop's ``/healthz`` every 20 ms.
Printed: the loop thread's CPU (cores) and ``/healthz``'s p50/p99, each N, both
versions, and their ratios; written to ``--out/line.json``.

Usage::

    python -m bench.line [--waiting 100 1000 4000] [--seconds 5] [--before 6d7ee8b]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import inspect
import json
import resource
import statistics
import subprocess
import sys
import threading
import time
import types
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chat.access import turns as after
from chat.counts import open_store
from testing.servers import ROOT, free_port

VISITORS = 256  # the live finding's addresses
ASK_EVERY_S = 0.02
HEALTHZ = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"


BEFORE = "chat_before"  # the revision's chat.access, loaded beside today's


def _load(revision: str, name: str) -> types.ModuleType | None:
    """``chat/<name>.py`` (``access/turns``) as it was at ``revision``, as
    ``chat_before.<name>``; None where the revision has no such file."""
    path = f"chat/{name}.py"
    shown = subprocess.run(["git", "show", f"{revision}:{path}"], cwd=ROOT, capture_output=True)
    if shown.returncode != 0:
        return None
    dotted = f"{BEFORE}.{name.replace('/', '.')}"
    spec = importlib.util.spec_from_loader(dotted, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = dotted.rsplit(".", 1)[0]
    sys.modules[spec.name] = module  # its neighbours and dataclasses look it up
    exec(compile(shown.stdout.decode(), f"{revision}:{path}", "exec"), module.__dict__)
    return module


def turns_at(revision: str) -> types.ModuleType:
    """``chat.access.turns`` as it was at ``revision``, with the modules it imported then
    (``errors``, ``access/limits``, ``access/shared_limits``, whichever it had) from the same
    revision, and today's metrics."""
    for package in (BEFORE, f"{BEFORE}.access"):
        sys.modules[package] = types.ModuleType(package)
        sys.modules[package].__path__ = []
    sys.modules[f"{BEFORE}.metrics"] = importlib.import_module("chat.metrics")
    sys.modules[BEFORE].metrics = sys.modules[f"{BEFORE}.metrics"]  # type: ignore[attr-defined]
    for name in ("errors", "access/limits", "access/shared_limits"):
        _load(revision, name)
    turns = _load(revision, "access/turns")
    assert turns is not None, f"{revision} has no chat/access/turns.py"
    return turns


async def _serve_healthz(port: int) -> asyncio.Server:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(HEALTHZ)
        await writer.drain()
        writer.close()

    return await asyncio.start_server(answer, "127.0.0.1", port)


def _ask(port: int, until: threading.Event, took: list[float]) -> None:
    """``/healthz`` every ``ASK_EVERY_S`` until told; each answer's time (ms)."""
    while not until.is_set():
        started = time.perf_counter()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as answer:
            answer.read()
        took.append((time.perf_counter() - started) * 1000)
        time.sleep(ASK_EVERY_S)


def _thread_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime


def _line(module: types.ModuleType) -> Any:
    """The module's line in memory, as its version builds one (a path and a worker before
    the counts' store, 2026-12-06; named ``Turns`` before that day's renames)."""
    line_class = getattr(module, "ReplyLine", None) or module.Turns
    values = {"core": 0, "max_replies": 10**6, "per_minute": 10**6, "slots": 1, "line": 10**6}
    if "worker" in inspect.signature(line_class).parameters:
        return line_class(":memory:", worker=0, **values)
    return line_class(open_store(":memory:", owner="bench"), **values)


async def _settled(value: Any) -> Any:
    """A call's result, awaited where its version is async (the store's, 2026-12-06)."""
    return await value if inspect.isawaitable(value) else value


async def measure(module: types.ModuleType, waiting: int, seconds: float) -> dict[str, float]:
    """N waiting behind one running reply for ``seconds``: the loop's CPU and /healthz."""
    line = _line(module)
    now = time.monotonic()
    await _settled(line.admit("address:running", now=now))
    tickets = [
        await _settled(line.admit(f"address:10.0.0.{n % VISITORS}", now=now))
        for n in range(waiting)
    ]

    async def show(place: Any) -> None:
        return None

    waiters = [asyncio.create_task(line.wait_turn(ticket, show)) for ticket in tickets]
    await asyncio.sleep(1.0)  # every waiter has looked once
    port, stop, took = free_port(), threading.Event(), []
    server = await _serve_healthz(port)
    asker = threading.Thread(target=_ask, args=(port, stop, took))
    cpu, wall = _thread_cpu_s(), time.monotonic()
    asker.start()
    await asyncio.sleep(seconds)
    cpu, wall = _thread_cpu_s() - cpu, time.monotonic() - wall
    stop.set()
    while asker.is_alive():
        await asyncio.sleep(0.05)
    server.close()
    for waiter in waiters:
        waiter.cancel()
    await asyncio.gather(*waiters, return_exceptions=True)
    quantiles = statistics.quantiles(took, n=100)
    return {
        "cpu_cores": cpu / wall,
        "healthz_p50_ms": quantiles[49],
        "healthz_p99_ms": quantiles[98],
    }


def _report(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| waiting | version | loop CPU (cores) | /healthz p50 ms | /healthz p99 ms |",
        "|---:|---|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['waiting']:,} | {row['version']} | {row['cpu_cores']:.2f} "
            f"| {row['healthz_p50_ms']:.1f} | {row['healthz_p99_ms']:.1f} |"
        )
    return "\n".join(lines)


def _ratios(rows: list[dict[str, Any]], before: str) -> str:
    out = []
    for waiting in sorted({row["waiting"] for row in rows}):
        old = next(r for r in rows if r["waiting"] == waiting and r["version"] == before)
        new = next(r for r in rows if r["waiting"] == waiting and r["version"] == "now")
        out.append(
            f"{waiting:,} waiting: CPU {old['cpu_cores'] / max(new['cpu_cores'], 1e-6):.1f}x "
            f"less, /healthz p99 {old['healthz_p99_ms'] / new['healthz_p99_ms']:.1f}x faster"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.line", description=__doc__)
    parser.add_argument("--waiting", type=int, nargs="+", default=[100, 1000, 4000])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--before", default="6d7ee8b", help="the git revision to compare")
    parser.add_argument("--out", type=Path, default=ROOT / "artifacts" / "bench")
    args = parser.parse_args(argv)
    versions: dict[str, Callable[[], types.ModuleType]] = {
        args.before: lambda: turns_at(args.before),
        "now": lambda: after,
    }
    rows = []
    for waiting in args.waiting:
        for name, module in versions.items():
            measured = asyncio.run(measure(module(), waiting, args.seconds))
            rows.append({"waiting": waiting, "version": name, **measured})
            print(f"{waiting:,} waiting, {name}: {measured}", flush=True)
    print(_report(rows))
    print(_ratios(rows, args.before))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "line.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
