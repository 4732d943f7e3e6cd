"""Path ``cores``: K bare engines at once, in K processes, each with the share of the GPUs
that ``ERNIE_ENGINES=K`` gives its core and the chats split over them.

No front end, no proxy: what the GPUs give K engine cores, the ceiling of the ``engines``
path as ``engine`` is the ceiling of one core. Where ``cores`` is no faster than
``engine``, the GPU (not the app) is what K cores share.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import multiprocessing
import os
from collections.abc import Sequence
from functools import partial
from multiprocessing.connection import Connection

from vllm.v1.engine.async_llm import AsyncLLM

from engine.engine_args import build_engine_args
from engine.plan.plan import Plan
from engine.vllm_door.internals import shut_down

from .clients import deal
from .measure import LoadResult, Loads, ProcessWatch, ReplyTiming, measure_loads, timed
from .openloop import OpenLoop, RateResult, run_rate, sweep
from .raw_engine import engine_load, engine_request, engine_talker

__all__ = ["cores_path"]


def _core(plan: Plan, index: int, reply_tokens: int, conn: Connection) -> None:
    """One core's process: its GPUs, its engine; then each load the parent asks for."""
    devices = plan.placement.devices(index)
    if devices is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = devices
    asyncio.run(_serve(plan, reply_tokens, conn))


async def _serve(plan: Plan, reply_tokens: int, conn: Connection) -> None:
    """Each load the parent asks for: a number of chats at once, or (visitors, start)."""
    request = engine_request(plan, reply_tokens)
    llm = AsyncLLM.from_engine_args(build_engine_args(plan))
    try:
        conn.send("ready")
        while (asked := await asyncio.to_thread(conn.recv)) is not None:
            if isinstance(asked, int):
                conn.send(await engine_load(llm, request, asked))
            else:
                conn.send(await run_rate(engine_talker(plan, llm), *asked))
    finally:
        await shut_down(llm)


def _split(chats: int, count: int) -> list[int]:
    """``chats`` over ``count`` cores, as even as it goes."""
    return [chats // count + (i < chats % count) for i in range(count)]


async def _load(pipes: Sequence[Connection], chats: int) -> list[ReplyTiming]:
    """``chats`` at once over the cores (one clock: CLOCK_MONOTONIC is the machine's)."""
    for conn, share in zip(pipes, _split(chats, len(pipes)), strict=True):
        conn.send(share)
    replies = await asyncio.gather(*(asyncio.to_thread(conn.recv) for conn in pipes))
    return [reply for core in replies for reply in core]


async def cores_path(
    plan: Plan, loads: Loads, count: int, open_loop: OpenLoop | None = None
) -> tuple[list[LoadResult], list[RateResult]]:
    """``count`` bare engine cores, started one after the other (each measures the GPU's
    free memory), then measured together at every load and every rate."""
    settings = plan.settings.with_values("bench", engines=count, workers=1)
    plan = dataclasses.replace(plan, settings=settings)
    spawn = multiprocessing.get_context("spawn")
    pipes, processes = [], []
    try:
        for index in range(count):
            parent, child = spawn.Pipe()
            process = spawn.Process(target=_core, args=(plan, index, loads.reply_tokens, child))
            process.start()
            pipes.append(parent)
            processes.append(process)
            if await asyncio.to_thread(parent.recv) != "ready":
                raise RuntimeError(f"cores: core {index} did not start")
        watch = ProcessWatch(*(process.pid for process in processes if process.pid))
        try:
            one_round = timed(watch, partial(_load, pipes))
            closed = await measure_loads("cores", loads, watch, one_round)
            if open_loop is None:
                return closed, []
            return closed, await sweep("cores", partial(deal, pipes), open_loop)
        finally:
            watch.close()
    finally:
        for conn in pipes:
            with contextlib.suppress(OSError):  # a core that ended already
                conn.send(None)  # the end
        for process in processes:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
