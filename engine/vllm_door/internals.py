"""Every use of a vLLM internal, in one place: read this before upgrading vLLM.

The app uses vLLM's public API elsewhere (``AsyncEngineArgs``, ``AsyncLLM.from_engine_args``,
``generate``, ``abort``, ``SamplingParams``). What vLLM does not promise to keep is here,
each with a contract test (``tests/engine/test_vllm_internals.py``) that fails naming the
vLLM version and the internal that moved:

1. several front ends on one engine core, as ``vllm serve --api-server-count N`` does
   (``shared_core_config``, ``launch_core``, ``attach_client``, ``core_processes``,
   ``stop_core``);
2. a running ``AsyncLLM``'s parts (``unfinished_requests``, ``ended_processes``,
   ``shut_down``);
3. vLLM's logging config (``logging_config``), its attention backend choice
   (``attention_backend``), its view of the machine (``cpu_memory_node``, ``nvml``);
4. the texts of vLLM's memory errors (``KV_TOO_SMALL`` ...), read to say what to change.

Checked against vLLM 0.29.0 (the lock, CPU) and 0.26 (the H200's image), whose
``launch_core_engines`` differ (below). The next upgrade is held by Chainlit's ``mcp<2``
pin (vLLM above 0.29 needs ``mcp>=2``); it needs this module's tests passing on the new
version, and the ``--api-server-count`` code (``vllm/v1/engine/utils.py``,
``vllm/entrypoints/cli/serve.py``) read again: the app copies what ``run_multi_api_server``
does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

    from vllm.config import VllmConfig
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

__all__ = [
    "KV_NOT_FREE",
    "KV_TOO_SMALL",
    "NOT_FREE",
    "NO_CACHE_MEMORY",
    "attach_client",
    "attention_backend",
    "core_processes",
    "cpu_memory_node",
    "ended_processes",
    "launch_core",
    "logging_config",
    "nvml",
    "shared_core_config",
    "shut_down",
    "stop_core",
    "unfinished_requests",
    "vllm_version",
]

# The app's wait for an engine core's teardown before vLLM kills it: vLLM's own is 5 s, and
# a CPU worker alone takes about 4 (a kill is a WARNING on every stop).
TEARDOWN_S = 15.0


def vllm_version() -> str:
    import vllm

    return str(vllm.__version__)


# --- 1. several front ends on one engine core ------------------------------------------
def shared_core_config(args: AsyncEngineArgs, clients: int) -> VllmConfig:
    """The engine config for a core with ``clients`` front ends, built by the launcher
    (``_api_process_*`` are the fields ``vllm serve --api-server-count`` sets)."""
    from vllm.usage.usage_lib import UsageContext

    args._api_process_count = clients
    args._api_process_rank = -1  # the launcher: no front end of its own
    return args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)


@contextlib.contextmanager
def launch_core(
    config: VllmConfig, clients: int, log_stats: bool
) -> Iterator[tuple[Any, list[str], list[str]]]:
    """Start the engine core; yields (its process manager, each client's input and output
    socket). Leaving the block waits for the core's start-up handshake."""
    from vllm.v1.engine.utils import get_engine_zmq_addresses, launch_core_engines
    from vllm.v1.executor import Executor

    executor = Executor.get_class(config)
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
        yield manager, list(addresses.inputs), list(addresses.outputs)


def attach_client(
    config: VllmConfig, inputs: list[str], outputs: list[str], index: int, log_stats: bool
) -> AsyncLLM:
    """Front end ``index``'s ``AsyncLLM`` on a running core (blocks until it is ready)."""
    from vllm.usage.usage_lib import UsageContext
    from vllm.v1.engine.async_llm import AsyncLLM

    config.parallel_config._api_process_rank = index
    return AsyncLLM.from_vllm_config(
        config,
        usage_context=UsageContext.OPENAI_API_SERVER,
        disable_log_stats=not log_stats,
        client_addresses={"input_address": inputs[index], "output_address": outputs[index]},
        client_count=len(inputs),
        client_index=index,
    )


def core_processes(manager: Any) -> list[BaseProcess]:
    """The engine core processes a launcher's process manager holds."""
    return list(getattr(manager, "processes", ()))


def stop_core(manager: Any, timeout_s: float = TEARDOWN_S) -> None:
    """End a launcher's engine core, waiting ``timeout_s`` for its teardown before a kill."""
    _with_teardown_wait(manager.shutdown, timeout_s)()


def _with_teardown_wait(method: Any, timeout_s: float) -> Any:
    """vLLM's ``shutdown`` with the teardown's wait where it takes one (0.29; 0.26 waits 5 s)."""
    if "timeout" in inspect.signature(method).parameters:
        return functools.partial(method, timeout=timeout_s)
    return method


# --- 2. a running AsyncLLM ----------------------------------------------------------------
def unfinished_requests(llm: AsyncLLM) -> int:
    """Requests the client holds now (running or queued)."""
    processor: Any = llm.output_processor
    return int(processor.get_num_unfinished_requests())


def ended_processes(llm: AsyncLLM) -> dict[str, int] | None:
    """Exit codes of the engine processes that ended, by name; None when vLLM does not say."""
    core = getattr(llm, "engine_core", None)
    manager = getattr(getattr(core, "resources", None), "engine_manager", None)
    try:
        return dict(manager.finished_procs())  # type: ignore[union-attr]
    except Exception:  # best effort: this client may have no process manager
        return None


async def shut_down(llm: AsyncLLM, timeout_s: float = TEARDOWN_S) -> None:
    """vLLM's shutdown, quietly and in order. vLLM ends the core before it cancels its
    output handler, which then logs the core's end as a failure with a traceback; and it
    force-kills a core still tearing down after 5 s (a CPU worker takes about 4), with a
    warning: the core gets ``timeout_s`` here."""
    handler: asyncio.Task[None] | None = getattr(llm, "output_handler", None)
    if handler is not None:
        handler.cancel()
        await asyncio.wait({handler})
    await asyncio.to_thread(_with_teardown_wait(llm.shutdown, timeout_s))


# --- 3. logging, the attention backend, the machine ---------------------------------------
def logging_config() -> dict[str, Any] | None:
    """vLLM's default logging config (a copy), or None when vLLM configures no logging."""
    import copy

    from vllm import envs
    from vllm.logger import DEFAULT_LOGGING_CONFIG

    return copy.deepcopy(DEFAULT_LOGGING_CONFIG) if envs.VLLM_CONFIGURE_LOGGING else None


def attention_backend(vllm_config: Any, head_size: int) -> str:
    """The attention backend vLLM selects for this config, asked the way its layers ask."""
    from vllm.config import set_current_vllm_config
    from vllm.v1.attention.selector import get_attn_backend

    with set_current_vllm_config(vllm_config):
        backend = get_attn_backend(
            head_size, vllm_config.model_config.dtype, vllm_config.cache_config.cache_dtype
        )
    return str(backend.get_name())


def cpu_memory_node() -> tuple[int, int]:
    """(total, available) bytes of the memory node vLLM's CPU worker reserves from."""
    from vllm.utils.cpu_resource_utils import get_memory_node_info

    node = get_memory_node_info(0)
    return int(node.total_memory), int(node.available_memory)


def nvml() -> Any:
    """vLLM's own copy of pynvml: it reads the GPUs without creating a CUDA context."""
    from vllm.third_party import pynvml

    return pynvml


# --- 4. the texts of vLLM's memory errors -------------------------------------------------
_NUMBER = r"(-?[\d.]+)"
# vllm/v1/core/kv_cache_utils.py: a request of max_model_len does not fit the KV cache.
KV_TOO_SMALL = re.compile(
    rf"max seq len \((\d+)\), \({_NUMBER} GiB KV cache is needed, which is larger than the "
    rf"available KV cache memory \({_NUMBER} GiB\)\.(?: Based on the available memory, the "
    r"estimated maximum model length is (\d+)\.)?"
)
# vllm/v1/worker/utils.py (GPU), cpu_worker.py (CPU): less memory free than the share.
NOT_FREE = re.compile(
    rf"\({_NUMBER}/{_NUMBER} GiB\) on startup is less than desired (?:GPU|CPU) memory "
    rf"utilization \({_NUMBER}, {_NUMBER} GiB\)"
)
# vLLM 0.26's gpu_worker.py: the KV cache's memory was taken while the model loaded.
KV_NOT_FREE = re.compile(
    rf"\({_NUMBER}/{_NUMBER} GiB\) on kv cache allocation is less than requested memory "
    rf"for kv \({_NUMBER}(?:/{_NUMBER})? GiB\)"
)
# vllm/v1/core/kv_cache_utils.py: the share leaves nothing for the KV cache.
NO_CACHE_MEMORY = "No available memory for the cache blocks"
