"""The run's vLLM servers, each started once when a path first needs it, and its client
processes."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from engine.vllm_door.plan import Plan

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
    started: dict[str, VllmServer] = field(default_factory=dict)
    peers: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    def __post_init__(self) -> None:
        self.stack.push_async_callback(self._stop_peers)

    async def app_args(self) -> VllmServer:
        if self.args.vllm_url:
            return VllmServer(str(self.args.vllm_url))
        if "app" not in self.started:
            log = self.args.out / "vllm-server.log"
            starting = vllm_server(self.plan, log, self.args.api_servers)
            self.started["app"] = await self.stack.enter_async_context(starting)
        return self.started["app"]

    async def peer(self, api_servers: int = 1) -> VllmServer:
        """``vllm serve`` with its defaults and ``api_servers`` API processes (another
        count stops the one before)."""
        name = f"peer-{api_servers}"
        if name not in self.started:
            await self._stop_peers()
            log = self.args.out / f"vllm-peer-{api_servers}.log"
            starting = peer_server(self.plan, log, api_servers)
            self.started[name] = await self.peers.enter_async_context(starting)
        return self.started[name]

    async def _stop_peers(self) -> None:
        await self.peers.aclose()
        self.peers = contextlib.AsyncExitStack()
        self.started = {k: v for k, v in self.started.items() if not k.startswith("peer")}
