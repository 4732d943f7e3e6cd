"""Soak: N chats held open for M minutes against the app; nothing may fail or leak.

Usage::

    python -m bench.soak --chats 100 --minutes 10 [--reply-tokens 64] [--think-s 1]

Starts ``chainlit run app.py`` with the ``ERNIE_*`` settings of the environment, replies
of exactly ``--reply-tokens`` (so a short reply is a truncated one) and per-chat limits
high enough for the load; waits until ready, runs one warm-up round, then each chat
sends, reads the whole reply, pauses ``--think-s`` and sends again until the time is up.
It prints one JSON line of results and exits 1 if a reply failed or came back truncated,
or if the app's memory at the end is more than ``--max-growth`` above its value after the
warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from testing.chat_client import ChatClient, Reply, wait_ready
from testing.servers import AppServer

from .measure import p99
from .paths import PROMPT, READY_TIMEOUT_S, UNLIMITED

__all__ = ["Load", "SoakResult", "soak"]

NO_TEXT = "The model wrote no text"  # the app's note (key no_text) in English


@dataclass
class SoakResult:
    chats: int
    seconds: float
    replies: int = 0
    failed: int = 0
    truncated: int = 0
    no_text: int = 0  # whole replies of tokens without text (the app says so); not failures
    ttft_p50_ms: float = 0.0
    ttft_p99_ms: float = 0.0
    rss_after_warmup_mib: float = 0.0
    rss_at_end_mib: float = 0.0
    problems: list[str] = field(default_factory=list)  # the first few, for the log

    @property
    def memory_growth(self) -> float:
        return self.rss_at_end_mib / self.rss_after_warmup_mib - 1

    def passed(self, max_growth: float) -> bool:
        return (
            self.replies > 0
            and not (self.failed or self.truncated)
            and (self.memory_growth <= max_growth)
        )


def _problem(reply: Reply, reply_tokens: int) -> str | None:
    """Why ``reply`` is not a whole reply of ``reply_tokens`` tokens, or None."""
    if reply.error is not None:
        return f"error: {reply.error}"
    if reply.final is None or not reply.text:
        return "no reply"
    if f"{reply_tokens} tokens · first token" not in reply.final:
        return f"truncated: {reply.final[-120:]!r}"
    return None


@dataclass(frozen=True)
class Load:
    """What each chat does: replies of ``reply_tokens``, a pause of ``think_s``, and the
    settings panel's values sent first (``panel``; None: the app's own settings)."""

    reply_tokens: int
    think_s: float
    panel: dict[str, Any] | None = None

    async def open(self, stack: contextlib.AsyncExitStack, url: str) -> ChatClient:
        chat = await stack.enter_async_context(ChatClient.connect(url))
        if self.panel is not None:
            await chat.change_settings(self.panel)
        return chat


async def _chat_until(
    url: str, deadline: float, load: Load, result: SoakResult, ttfts: list[float]
) -> None:
    reply_tokens, think_s = load.reply_tokens, load.think_s
    async with contextlib.AsyncExitStack() as stack:
        chat = await load.open(stack, url)
        while time.monotonic() < deadline:
            try:
                reply = await chat.send(PROMPT, timeout_s=300)
                problem = _problem(reply, reply_tokens)
            except Exception as exc:  # a hang or a dropped socket is a failure too
                problem = f"failed: {exc!r}"
                reply = None
            result.replies += 1
            if problem is not None:
                if problem.startswith("truncated"):
                    result.truncated += 1
                else:
                    result.failed += 1
                if len(result.problems) < 5:
                    result.problems.append(problem)
            elif reply is not None and reply.ttft_s is not None:
                ttfts.append(reply.ttft_s)
                result.no_text += NO_TEXT in (reply.final or "")
            await asyncio.sleep(think_s)


def _rss_mib(process: psutil.Process) -> float:
    return round(process.memory_info().rss / 2**20, 1)


async def soak(url: str, pid: int, *, chats: int, seconds: float, load: Load) -> SoakResult:
    """Run the load against a ready app whose process is ``pid``."""
    process = psutil.Process(pid)
    async with contextlib.AsyncExitStack() as stack:  # the warm-up: one round, not counted
        clients = await asyncio.gather(*(load.open(stack, url) for _ in range(chats)))
        await asyncio.gather(*(client.send(PROMPT, timeout_s=300) for client in clients))
    result = SoakResult(chats, seconds, rss_after_warmup_mib=_rss_mib(process))
    ttfts: list[float] = []
    deadline = time.monotonic() + seconds
    await asyncio.gather(*(_chat_until(url, deadline, load, result, ttfts) for _ in range(chats)))
    result.rss_at_end_mib = _rss_mib(process)
    if ttfts:
        result.ttft_p50_ms = round(statistics.median(ttfts) * 1000, 1)
        result.ttft_p99_ms = round(p99(ttfts) * 1000, 1)
    return result


async def _run(args: argparse.Namespace) -> SoakResult:
    env = {
        **UNLIMITED,  # the load, not the limits, is tested
        **{k: v for k, v in os.environ.items() if k.startswith("ERNIE_")},
        "ERNIE_MAX_TOKENS": str(args.reply_tokens),
        "ERNIE_IGNORE_EOS": "true",
    }
    log = Path(tempfile.mkdtemp(prefix="soak-")) / "app.log"
    print(f"soak: app log {log}", file=sys.stderr)
    with AppServer.run(env, log) as server:
        await wait_ready(server.url, READY_TIMEOUT_S)
        return await soak(
            server.url,
            server.process.pid,
            chats=args.chats,
            seconds=args.minutes * 60,
            load=Load(args.reply_tokens, args.think_s),
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--reply-tokens", type=int, default=64)
    parser.add_argument("--think-s", type=float, default=1.0)
    parser.add_argument("--max-growth", type=float, default=0.10)
    args = parser.parse_args(argv)
    result = asyncio.run(_run(args))
    print(json.dumps(asdict(result) | {"memory_growth": round(result.memory_growth, 4)}))
    return 0 if result.passed(args.max_growth) else 1


if __name__ == "__main__":
    sys.exit(main())
