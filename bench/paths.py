"""The paths, each measured at every concurrency of the run."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.model.system_prompts import resolve_system_prompt
from engine.plan.plan import Plan
from testing.chat_client import ChatClient
from testing.demo import NO_LIMITS
from testing.servers import ROOT, AppServer, Server, openai_server

from .clients import Talker
from .measure import (
    LoadResult,
    Loads,
    ProcessWatch,
    ReplyTiming,
    Round,
    measure_loads,
    summarise,
)
from .openloop import OpenLoop, RateResult, Turn, sweep
from .profile import profiled
from .traffic import Conversation

__all__ = [
    "PROMPT",
    "UNLIMITED",
    "VllmServer",
    "app_path",
    "http_path",
    "remote_path",
    "vllm_server",
]

# What a socket path measured: its cold burst, its loads, its open loop's rates.
PathResult = tuple[LoadResult, list[LoadResult], list[RateResult]]
Converse = Callable[[Conversation], Awaitable[list[Turn]]]
# A realistic first message of a Chinese chat: a question with some context (~150 characters).
PROMPT = (
    "我下个月要去杭州出差三天，第一次去。工作日白天都在滨江开会，晚上和周末有空。"
    "请帮我安排一下：晚上可以去哪里走走、吃什么本地菜比较地道、从滨江过去方便吗？"
    "另外想给家里人带点特产，预算三百元左右，有什么推荐？最好按天列一个简单的计划，"
    "并说明每个地方大概需要多长时间。"
)
READY_TIMEOUT_S = 900
# Every chat of a run comes from this machine's one address: the load, not the per-address
# limits, is measured (a run's own ERNIE_* settings still win).
UNLIMITED = NO_LIMITS


def _known_to(root: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` less the ERNIE_* settings the app at ``root`` does not define (a version from
    before they were added stops at an unknown name)."""
    source = "".join(path.read_text() for path in (root / "settings").glob("*.py"))
    known = {n for n in env if not n.startswith("ERNIE_") or f" {n[6:].lower()}:" in source}
    return {name: value for name, value in env.items() if name in known}


def _settings_env() -> dict[str, str]:
    """This run's ERNIE_* settings, for the apps it starts (they read no other)."""
    return {k: v for k, v in os.environ.items() if k.startswith("ERNIE_")}


async def _chat_round(urls: Sequence[str], chats: int, watch: ProcessWatch, path: str) -> Round:
    """``chats`` chats at once, spread over the servers at ``urls`` in turn (the CPU counted
    from the first message sent: not the connections)."""
    async with contextlib.AsyncExitStack() as stack:
        clients = await asyncio.gather(
            *(
                stack.enter_async_context(
                    ChatClient.connect(urls[i % len(urls)], settle=not path.startswith("http"))
                )
                for i in range(chats)
            )
        )
        before = watch.cpu_s()
        replies = await asyncio.gather(*(client.send(PROMPT) for client in clients))
        cpu = watch.cpu_s() - before
    timings = []
    for reply in replies:
        if reply.error is not None:
            raise RuntimeError(f"{path}: a chat got an error: {reply.error}")
        if reply.first_text_at is None or reply.ended_at is None or not reply.text:
            raise RuntimeError(f"{path}: a chat got no reply")
        timings.append(
            ReplyTiming(reply.sent_at, reply.first_text_at, reply.ended_at, len(reply.frames))
        )
    return Round(timings, cpu)


async def _socket_loads(
    path: str,
    servers: Sequence[Server],
    loads: Loads,
    extra_pids: Sequence[int] = (),
    open_loop: OpenLoop | None = None,
) -> PathResult:
    """A cold burst right after ready (reported apart), a warm-up, the loads, then the
    open loop's rates; the CPU of the servers' process trees (and of ``extra_pids``': a
    vLLM server's)."""
    urls = [server.url for server in servers]
    watch = ProcessWatch(*(server.process.pid for server in servers), *extra_pids)
    try:
        cold = f"{path}-cold"
        burst = await _chat_round(urls, min(64, loads.warm_up), watch, cold)
        cold_result = summarise(cold, [burst], loads.reply_tokens, watch.peak_rss)
        one_round = functools.partial(_chat_round, urls, watch=watch, path=path)
        closed = await measure_loads(path, loads, watch, one_round)
        if open_loop is None:
            return cold_result, closed, []
        panel = not path.startswith("http")
        talker = Talker("socket", tuple(urls), open_loop.system_prompt, panel)
        pid = servers[0].process.pid if open_loop.profiles(path) else None
        spied = (open_loop.profile_to or Path()) / f"{path.replace('@', '-at-')}-pyspy.txt"
        with profiled(pid, spied):
            rates = await sweep(path, open_loop.runner(talker), open_loop, watch.cpu_s)
        return cold_result, closed, rates
    finally:
        watch.close()


async def app_path(
    loads: Loads,
    logs: Path,
    *,
    path: str = "app",
    replicas: int = 1,
    extra_pids: Sequence[int] = (),
    open_loop: OpenLoop | None = None,
    root: Path = ROOT,
    **settings: str,
) -> PathResult:
    """The app as ``scripts/start.sh`` starts it (``python -m serve``; path ``chainlit``:
    ``chainlit run app.py``) with the same settings (and ``settings``), replies of exactly
    reply_tokens (``replicas`` processes with the chats spread over them: remote engines
    only). ``ERNIE_WORKERS``, ``ERNIE_ENGINES`` in ``settings``: a group behind its one
    port; unset: one process, one core. ``root``: another checkout of the app (a version to
    compare with, in the same run: its results are named ``path@base``)."""
    env = {**UNLIMITED, **_settings_env(), **settings, "ERNIE_IGNORE_EOS": "true"}
    longest = max(loads.reply_tokens, open_loop.reply_max if open_loop else 0)
    # Replies of reply_tokens; the open loop's panel asks for up to reply_max.
    env.update(ERNIE_MAX_TOKENS=str(longest), ERNIE_REPLY_TOKENS=str(loads.reply_tokens))
    if root != ROOT:  # another version: the settings it knows (it refuses others), as it reads them
        env = _known_to(root, env) | {"ERNIE_MAX_TOKENS": str(loads.reply_tokens)}
    env.setdefault("ERNIE_WORKERS", "1")
    env.setdefault("ERNIE_ENGINES", "1")
    app = "app.py" if path == "chainlit" else None
    name = path if root == ROOT else f"{path}@base"
    file_name = name.replace("@", "-at-")  # the device tool's files: no '@' in names
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(
                AppServer.run(env, logs / f"{file_name}-{i}.log", app=app, root=root)
            )
            for i in range(replicas)
        ]
        for server in servers:  # an app that exits (a bad setting) fails the run at once
            await asyncio.to_thread(server.wait, "/readyz", READY_TIMEOUT_S)
            if env["ERNIE_WORKERS"] != "1" or env["ERNIE_ENGINES"] != "1":
                await server.every_worker_ready(READY_TIMEOUT_S)  # not just the first unit
        return await _socket_loads(name, servers, loads, extra_pids, open_loop)


@dataclass(frozen=True)
class VllmServer:
    """A vLLM server the http and remote paths talk to; ``pids``: its processes whose CPU
    the run counts (none for a server started elsewhere, ``--vllm-url``)."""

    url: str
    pids: tuple[int, ...] = ()


@contextlib.asynccontextmanager
async def vllm_server(plan: Plan, log: Path, api_servers: int = 1) -> AsyncIterator[VllmServer]:
    """vLLM's OpenAI-compatible server with the app's engine arguments and
    ``--api-server-count`` (the http and remote paths share one per run)."""
    with openai_server(plan, log, api_servers=api_servers) as vllm:
        await asyncio.to_thread(vllm.wait, "/health", READY_TIMEOUT_S)
        yield VllmServer(vllm.url, (vllm.process.pid,))


async def remote_path(
    vllm: VllmServer, loads: Loads, logs: Path, replicas: int, open_loop: OpenLoop | None
) -> PathResult:
    """``replicas`` apps with ``ERNIE_ENGINE=remote`` on the vLLM server: the scale-out
    set-up (a load balancer spreads the chats over the apps)."""
    return await app_path(
        loads,
        logs,
        path="remote",
        replicas=replicas,
        extra_pids=vllm.pids,
        open_loop=open_loop,
        ERNIE_ENGINE="remote",
        ERNIE_REMOTE_URL=vllm.url,
    )


async def http_path(
    vllm: VllmServer, plan: Plan, loads: Loads, logs: Path, open_loop: OpenLoop | None
) -> PathResult:
    """The guides' minimal Chainlit app over streaming HTTP to the vLLM server."""
    env = {
        "BENCH_VLLM_URL": vllm.url,
        "BENCH_MAX_TOKENS": str(loads.reply_tokens),
        "BENCH_SYSTEM_PROMPT": resolve_system_prompt(plan.settings.system_prompt),
    }
    with AppServer.run(env, logs / "http-app.log", app="bench/http_app.py") as server:
        await asyncio.to_thread(server.wait, "/", READY_TIMEOUT_S)
        return await _socket_loads("http", [server], loads, vllm.pids, open_loop)
