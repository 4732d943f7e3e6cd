"""The open loop's visitors from client processes of their own (``--client-procs``), pinned to
CPUs of their own (``--client-cpus``), the app to the rest (``--app-cpus``).

At hundreds of new chats a second one Python process cannot hold every socket and read
every frame in time: the client, not the app, would set the knee. And a client on the app's
CPUs takes what the app would have used. So the visitors of each rate are dealt over N
spawned processes (visitor ``i`` to process ``i % N``), each starting them at its moment
from one start on the machine's monotonic clock, each speaking from addresses of its own;
the CPU the processes spent is reported beside each rate (``RateResult.client_cores``).

Usage::

    with ClientPool(6, cpus={10, 11, 12, 13, 14, 15}) as pool:
        talks = await pool.run(Talker("socket", (url,), "zh"), visitors)
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Literal

from serve.web import raise_open_files
from testing.visitors import visitors_from

from .measure import ProcessWatch
from .openloop import Turn, run_rate
from .traffic import Conversation

__all__ = ["ClientPool", "Talker", "cpu_list", "deal"]

FIRST_BLOCK = 16  # process i's visitors from 127.(16 + i).0.1


def cpu_list(text: str) -> set[int]:
    """``0-9`` or ``0,2,4-7`` (as taskset reads a list) as a set of CPU numbers."""
    cpus: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


async def deal(
    pipes: Sequence[Connection], visitors: list[Conversation], *before: object
) -> list[list[Turn]]:
    """The visitors over the processes at the other end of ``pipes`` in turn (visitor ``i``
    to process ``i % N``), each sent ``(*before, its visitors, start)`` to start them at
    their moments from one start; every conversation as they answer it."""
    start, count = time.monotonic() + 1.0, len(pipes)
    for index, conn in enumerate(pipes):
        conn.send((*before, [v for v in visitors if v.index % count == index], start))
    parts = await asyncio.gather(*(asyncio.to_thread(conn.recv) for conn in pipes))
    return [talk for part in parts for talk in part]


@dataclass(frozen=True)
class Talker:
    """How a visitor talks to the path: a tab on the app's Socket.IO (``socket``; ``panel``:
    the app has a settings panel) or an OpenAI client of ``vllm serve`` (``openai``)."""

    kind: Literal["socket", "openai"]
    urls: tuple[str, ...]
    system_prompt: str | None = None
    panel: bool = True

    async def run(self, visitors: list[Conversation], start: float) -> list[list[Turn]]:
        if self.kind == "socket":
            from .talk import socket_conversation

            async def tab(visitor: Conversation) -> list[Turn]:
                url = self.urls[visitor.index % len(self.urls)]
                return await socket_conversation(
                    url, visitor, system_prompt=self.system_prompt, panel=self.panel
                )

            return await run_rate(tab, visitors, start)
        from .talk import openai_client, openai_conversation

        async with openai_client() as client:

            async def chat(visitor: Conversation) -> list[Turn]:
                url = self.urls[visitor.index % len(self.urls)]
                return await openai_conversation(client, url, self.system_prompt or "", visitor)

            return await run_rate(chat, visitors, start)


def _client(index: int, cpus: set[int] | None, conn: Connection) -> None:
    """One client process: its CPUs, its addresses; then each rate the parent deals it."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    raise_open_files()
    visitors_from(FIRST_BLOCK + index)
    while (asked := conn.recv()) is not None:
        talker, visitors, start = asked
        conn.send(asyncio.run(talker.run(visitors, start)))


class ClientPool:
    """``procs`` client processes (pinned to ``cpus`` when given) for the open loop."""

    def __init__(self, procs: int, cpus: set[int] | None = None) -> None:
        spawn = multiprocessing.get_context("spawn")
        self._pipes: list[Connection] = []
        self._processes = []
        for index in range(procs):
            parent, child = spawn.Pipe()
            process = spawn.Process(target=_client, args=(index, cpus, child), daemon=True)
            process.start()
            self._pipes.append(parent)
            self._processes.append(process)
        self._watch = ProcessWatch(*(p.pid for p in self._processes if p.pid))

    async def run(self, talker: Talker, visitors: list[Conversation]) -> list[list[Turn]]:
        """Every visitor, dealt over the processes, each at its moment from one start."""
        return await deal(self._pipes, visitors, talker)

    def cpu_s(self) -> float:
        """The CPU seconds the client processes have spent."""
        return self._watch.cpu_s()

    def close(self) -> None:
        self._watch.close()
        for conn in self._pipes:
            with contextlib.suppress(OSError):
                conn.send(None)
        for process in self._processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()

    def __enter__(self) -> ClientPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def maybe_pool(procs: int, cpus: set[int] | None) -> Iterator[ClientPool | None]:
    """A pool of ``procs`` processes, or None (0: the visitors in the bench's own loop)."""
    if procs <= 0:
        yield None
        return
    with ClientPool(procs, cpus) as pool:
        yield pool
