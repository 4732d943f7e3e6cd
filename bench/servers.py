"""The run's vLLM servers, each started once when a path first needs it, and its client
processes."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from engine.plan.plan import Plan

from .paths import VllmServer, vllm_server
from .peer import peer_server

__all__ = ["Servers"]


@dataclass
class Servers:
    """The run's vLLM servers, each started when a path first needs it: the app's engine
    arguments (the remote path), or vLLM's own defaults (the vllm and http paths; one at a
    time, each holds the GPU's memory); and the run's client processes, if any."""

    args: Any
    plan: Plan
    stack: contextlib.AsyncExitStack
    clients: Any = None  # bench.clients.ClientPool, or None
    app: VllmServer | None = None  # the remote path's
    peer_of: tuple[int, VllmServer] | None = None  # vllm serve's now: its API servers, it
    peers: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    def __post_init__(self) -> None:
        self.stack.push_async_callback(self._stop_peer)

    async def app_args(self) -> VllmServer:
        if self.args.vllm_url:
            return VllmServer(str(self.args.vllm_url))
        if self.app is None:
            log = self.args.out / "vllm-server.log"
            starting = vllm_server(self.plan, log, self.args.api_servers)
            self.app = await self.stack.enter_async_context(starting)
        return self.app

    async def peer(self, api_servers: int = 1) -> VllmServer:
        """``vllm serve`` with its defaults and ``api_servers`` API processes (another
        count stops the one before)."""
        if self.peer_of is None or self.peer_of[0] != api_servers:
            await self._stop_peer()
            log = self.args.out / f"vllm-peer-{api_servers}.log"
            starting = peer_server(self.plan, log, api_servers)
            self.peer_of = api_servers, await self.peers.enter_async_context(starting)
        return self.peer_of[1]

    async def _stop_peer(self) -> None:
        await self.peers.aclose()
        self.peers, self.peer_of = contextlib.AsyncExitStack(), None
