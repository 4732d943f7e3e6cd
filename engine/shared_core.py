"""One engine core, several front-end processes: vLLM's multi-API-server mechanism.

``vllm serve --api-server-count N`` starts one engine core with an input and an output
socket per front end, and each API process attaches its own ``AsyncLLM`` client. The same
mechanism serves the chat app's workers (``serve.group``). The vLLM internals it takes
are in ``engine.vllm_door.internals``.

Usage::

    with launch_shared_core(plan, clients=2) as core:   # in the launcher
        start the front ends, handing each ``core`` and its index
    # leaving the block waits for the engine core's start-up handshake
    core.dead()  -> "engine core (pid 12) killed by SIGKILL" or None
    core.shutdown()

    attachment = Attachment(plan, core, index, folder, worker=3)   # handed to worker 3's process
    llm = attach(core, index) # its AsyncLLM (``open_backend``); blocks until the core is ready

Facts this relies on (tried on both versions): the engine core sends READY once per
client slot, so a restarted front end cannot attach again (the group restarts); a front
end does not watch the engine core (the launcher does); a dead front end's requests are
not aborted (the group restart ends them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.engine_args import build_engine_args
from engine.vllm_door.internals import (
    attach_client,
    core_processes,
    launch_core,
    shared_core_config,
    stop_core,
)

from .core_errors import exit_reason

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.engine.async_llm import AsyncLLM

    from engine.plan.plan import Plan

__all__ = ["Attachment", "SharedCore", "attach", "launch_shared_core"]


@dataclass
class SharedCore:
    """What a front end needs to attach (picklable: it travels to spawned processes)."""

    config: VllmConfig
    inputs: list[str]
    outputs: list[str]
    log_stats: bool
    manager: Any = field(default=None, repr=False)  # the launcher's process manager only

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"manager": None}

    def dead(self) -> str | None:
        """How the engine core's process ended, or None while it runs."""
        for process in core_processes(self.manager):
            if process.exitcode is not None:
                return f"engine core (pid {process.pid}) {exit_reason(process.exitcode)}"
        return None

    def sentinels(self) -> list[int]:
        """The engine core processes' sentinels, for ``multiprocessing.connection.wait``."""
        return [p.sentinel for p in core_processes(self.manager)]

    def shutdown(self) -> None:
        if self.manager is not None:
            stop_core(self.manager)
            self.manager = None


@dataclass(frozen=True)
class Attachment:
    """A front end's place in a group: its plan (checked by the launcher: the core holds
    the machine's memory now), the shared core (None: the group's engine is remote), its
    client index on that core, the folder where the group's front ends keep what they
    share, and its number among all the group's workers (over every engine core)."""

    plan: Plan
    core: SharedCore | None
    index: int
    folder: Path
    worker: int


@contextlib.contextmanager
def launch_shared_core(plan: Plan, clients: int) -> Iterator[SharedCore]:
    """Start the engine core for ``clients`` front ends; the front ends are started in
    the block, and leaving it waits for the core's handshake (the model loads then)."""
    args = build_engine_args(plan)
    config, log_stats = shared_core_config(args, clients), not args.disable_log_stats
    with launch_core(config, clients, log_stats) as (manager, inputs, outputs):
        yield SharedCore(config, inputs, outputs, log_stats, manager)


def attach(core: SharedCore, index: int) -> AsyncLLM:
    """Front end ``index``'s ``AsyncLLM`` on the shared core (blocks until it is ready)."""
    return attach_client(core.config, core.inputs, core.outputs, index, core.log_stats)
