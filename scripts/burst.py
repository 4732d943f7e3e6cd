"""Time to first token when many chats send at the same moment, against a running app.

Usage::

    python scripts/burst.py http://127.0.0.1:8000 --chats 64 --rounds 5

Opens ``--chats`` chats, then ``--rounds`` times sends the benchmark's prompt from all of
them at once and prints each round's time to first token (p50 and max). Start the app
with short replies (``ERNIE_MAX_TOKENS=4 ERNIE_IGNORE_EOS=true``) so the numbers are
about taking messages in, not about generating. With ``--pid`` (the serving process, not
its engine core) it also prints that process's CPU time per message: the loop's cost of
taking a message in and starting its reply, plus the few tokens of the short reply.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.paths import PROMPT
from testing.chat_client import ChatClient, wait_ready


def _cpu_s(process: psutil.Process | None) -> float:
    if process is None:
        return 0.0
    times = process.cpu_times()
    return times.user + times.system


async def burst(url: str, chats: int, rounds: int, pid: int | None) -> None:
    await wait_ready(url, 600)
    process = psutil.Process(pid) if pid else None
    async with contextlib.AsyncExitStack() as stack:
        clients = await asyncio.gather(
            *(stack.enter_async_context(ChatClient.connect(url)) for _ in range(chats))
        )
        before = _cpu_s(process)
        for number in range(rounds):
            replies = await asyncio.gather(*(client.send(PROMPT) for client in clients))
            ttfts = [reply.ttft_s or float("nan") for reply in replies]
            print(
                f"round {number}: TTFT p50 {statistics.median(ttfts) * 1000:.0f} ms, "
                f"max {max(ttfts) * 1000:.0f} ms"
            )
        if process is not None:
            per_message = (_cpu_s(process) - before) / (chats * rounds)
            print(f"process {pid}: {per_message * 1000:.2f} ms of CPU per message")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--chats", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pid", type=int, help="the serving process, to count its CPU")
    args = parser.parse_args()
    asyncio.run(burst(args.url, args.chats, args.rounds, args.pid))


if __name__ == "__main__":
    main()
