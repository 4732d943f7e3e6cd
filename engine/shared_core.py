"""One engine core, several front-end processes: vLLM's multi-API-server mechanism.

``vllm serve --api-server-count N`` starts one engine core with an input and an output
socket per front end, and each API process attaches its own ``AsyncLLM`` client. The same
mechanism serves the chat app's workers (``serve.group``). These are vLLM internals, so
every use of them is here; it runs on vLLM 0.29 (the lock) and 0.26 (the H200 image),
whose ``launch_core_engines`` differ.

Usage::

    with launch_shared_core(plan, clients=2) as core:   # in the launcher
        start the front ends, handing each ``core`` and its index
    # leaving the block waits for the engine core's start-up handshake
    core.dead()  -> "engine core (pid 12) killed by SIGKILL" or None
    core.shutdown()

    join(plan, core, index, folder, worker=3)  # in front end ``index`` of this core,
                                                # the group's worker 3, before the app starts
    llm = attach(core, index) # its AsyncLLM (``open_backend``); blocks until the core is ready

Facts this relies on (tried on both versions): the engine core sends READY once per
client slot, so a restarted front end cannot attach again (the group restarts); a front
end does not watch the engine core (the launcher does); a dead front end's requests are
not aborted (the group restart ends them).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm.usage.usage_lib import UsageContext
from vllm.v1.engine.async_llm import AsyncLLM
from vllm.v1.engine.utils import get_engine_zmq_addresses, launch_core_engines
from vllm.v1.executor import Executor

from deploy.engine_args import build_engine_args

from .core_errors import exit_reason

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.engine.arg_utils import AsyncEngineArgs

    from deploy.plan import Plan

__all__ = ["Attachment", "SharedCore", "attach", "join", "joined", "launch_shared_core"]


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

    @property
    def clients(self) -> int:
        return len(self.inputs)

    def dead(self) -> str | None:
        """How the engine core's process ended, or None while it runs."""
        for process in getattr(self.manager, "processes", ()):
            if process.exitcode is not None:
                return f"engine core (pid {process.pid}) {exit_reason(process.exitcode)}"
        return None

    def sentinels(self) -> list[int]:
        """The engine core processes' sentinels, for ``multiprocessing.connection.wait``."""
        return [p.sentinel for p in getattr(self.manager, "processes", ())]

    def shutdown(self) -> None:
        if self.manager is not None:
            self.manager.shutdown()
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


def _config(args: AsyncEngineArgs, clients: int) -> VllmConfig:
    args._api_process_count = clients
    args._api_process_rank = -1  # the launcher: no front end of its own
    return args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)


@contextlib.contextmanager
def launch_shared_core(plan: Plan, clients: int) -> Iterator[SharedCore]:
    """Start the engine core for ``clients`` front ends; the front ends are started in
    the block, and leaving it waits for the core's handshake (the model loads then)."""
    args = build_engine_args(plan)
    config = _config(args, clients)
    executor = Executor.get_class(config)
    log_stats = not args.disable_log_stats
    addresses = get_engine_zmq_addresses(config, clients)
    launch: Any = launch_core_engines
    extra: dict[str, int] = {}
    if "num_api_servers" in inspect.signature(launch_core_engines).parameters:  # vLLM 0.26
        extra["num_api_servers"] = clients
    with launch(config, executor, log_stats, addresses, **extra) as got:
        if isinstance(got, tuple):  # vLLM 0.26: (manager, coordinator, addresses[, queue])
            manager, addresses = got[0], got[2]
        else:  # vLLM 0.29: a CoreEngineLaunch
            manager, addresses = got.engine_manager, got.addresses
        yield SharedCore(config, addresses.inputs, addresses.outputs, log_stats, manager)


def attach(core: SharedCore, index: int) -> AsyncLLM:
    """Front end ``index``'s ``AsyncLLM`` on the shared core (blocks until it is ready)."""
    core.config.parallel_config._api_process_rank = index
    return AsyncLLM.from_vllm_config(
        core.config,
        usage_context=UsageContext.OPENAI_API_SERVER,
        disable_log_stats=not core.log_stats,
        client_addresses={
            "input_address": core.inputs[index],
            "output_address": core.outputs[index],
        },
        client_count=core.clients,
        client_index=index,
    )


_joined: Attachment | None = None


def join(plan: Plan, core: SharedCore | None, index: int, folder: Path, *, worker: int) -> None:
    """Make this process front end ``index`` of its core, worker ``worker`` of a group
    (before the app starts)."""
    global _joined
    _joined = Attachment(plan, core, index, folder, worker)


def joined() -> Attachment | None:
    """This process's place in a group, or None when it runs its own engine."""
    return _joined
