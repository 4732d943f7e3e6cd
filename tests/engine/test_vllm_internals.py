"""The contract with vLLM's internals (``engine.vllm_door.internals``): each test names the vLLM
version and the internal that moved, so an upgrade says what to read again. They look at
vLLM's code without starting an engine; the group and engine tests run them for real.
Run on the lock's vLLM in CI and on the H200's (``pytest tests/engine/test_vllm_internals.py``).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.vllm_door import internals as vllm_internals
from engine.vllm_door.internals import vllm_version


def moved(internal: str, what: str) -> str:
    return f"vLLM {vllm_version()}: {internal} moved ({what}); read engine/vllm_door/internals.py"


def parameters(function: Callable[..., Any]) -> set[str]:
    return set(inspect.signature(function).parameters)


def test_a_core_for_several_front_ends_is_configured_as_vllm_serve_does() -> None:
    from vllm.config import ParallelConfig
    from vllm.engine.arg_utils import AsyncEngineArgs

    args_fields = set(AsyncEngineArgs.__dataclass_fields__)
    parallel_fields = set(ParallelConfig.__dataclass_fields__)
    for name in ("_api_process_count", "_api_process_rank"):
        assert name in args_fields, moved(f"AsyncEngineArgs.{name}", "the field is gone")
        assert name in parallel_fields, moved(f"ParallelConfig.{name}", "the field is gone")


def test_the_core_is_launched_with_one_socket_pair_per_front_end() -> None:
    from vllm.v1.engine import utils

    for name in ("get_engine_zmq_addresses", "launch_core_engines"):
        assert hasattr(utils, name), moved(f"vllm.v1.engine.utils.{name}", "not there")
    got = list(inspect.signature(utils.launch_core_engines).parameters)
    assert got[:4] == ["vllm_config", "executor_class", "log_stats", "addresses"], moved(
        "launch_core_engines", f"its arguments are {got}"
    )
    fields = getattr(utils, "EngineZmqAddresses", None)
    assert fields is not None and {"inputs", "outputs"} <= set(fields.__dataclass_fields__), moved(
        "EngineZmqAddresses", "no inputs/outputs lists"
    )
    manager = utils.CoreEngineProcManager
    for name in ("finished_procs", "shutdown", "sentinels"):
        assert hasattr(manager, name), moved(f"CoreEngineProcManager.{name}", "not there")
    assert "processes" in inspect.getsource(manager.__init__), moved(
        "CoreEngineProcManager.processes", "not set in __init__"
    )


def test_a_front_end_attaches_its_client_by_index() -> None:
    from vllm.v1.engine.async_llm import AsyncLLM

    wanted = {"client_addresses", "client_count", "client_index", "usage_context"}
    got = parameters(AsyncLLM.from_vllm_config)
    assert wanted <= got, moved("AsyncLLM.from_vllm_config", f"missing {wanted - got}")


def test_a_running_clients_parts_are_where_the_app_reads_them() -> None:
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.engine.output_processor import OutputProcessor

    assert hasattr(OutputProcessor, "get_num_unfinished_requests"), moved(
        "OutputProcessor.get_num_unfinished_requests", "not there"
    )
    init = inspect.getsource(AsyncLLM.__init__)
    for name in ("self.output_processor", "self.engine_core", "self.output_handler"):
        assert name in init, moved(f"AsyncLLM {name}", "not set in __init__")
    from vllm.v1.engine.core_client import MPClient

    assert "engine_manager" in inspect.getsource(importlib.import_module(MPClient.__module__)), (
        moved("MPClient.resources.engine_manager", "not there")
    )


def test_shutdown_takes_a_timeout_for_the_cores_teardown() -> None:
    from vllm.v1.engine.async_llm import AsyncLLM

    if vllm_version().startswith("0.26"):
        pytest.skip("vLLM 0.26's shutdown takes no timeout: its core gets vLLM's own 5 s")
    from vllm.v1.engine.utils import CoreEngineProcManager

    assert "timeout" in parameters(AsyncLLM.shutdown), moved("AsyncLLM.shutdown", "no timeout")
    assert "timeout" in parameters(CoreEngineProcManager.shutdown), moved(
        "CoreEngineProcManager.shutdown", "no timeout"
    )


def test_vllms_logging_config_is_a_dict_config_with_a_vllm_logger() -> None:
    config = vllm_internals.logging_config()
    assert config is not None, moved("envs.VLLM_CONFIGURE_LOGGING", "logging not configured")
    assert "vllm" in config.get("loggers", {}), moved("DEFAULT_LOGGING_CONFIG", "no vllm logger")


def test_the_attention_backend_is_asked_as_vllms_layers_ask() -> None:
    from vllm.config import set_current_vllm_config
    from vllm.v1.attention import selector

    got = list(inspect.signature(selector.get_attn_backend).parameters)
    assert got[:3] == ["head_size", "dtype", "kv_cache_dtype"], moved(
        "get_attn_backend", f"its arguments are {got}"
    )
    assert callable(set_current_vllm_config)


def test_the_machine_is_read_the_way_vllm_reads_it() -> None:
    total, available = vllm_internals.cpu_memory_node()
    assert 0 < available <= total, moved("get_memory_node_info", f"{total=} {available=}")
    nvml = vllm_internals.nvml()
    for name in ("nvmlInit", "nvmlShutdown", "nvmlSystemGetDriverVersion"):
        assert hasattr(nvml, name), moved(f"vllm.third_party.pynvml.{name}", "not there")


# The texts of vLLM's memory errors: where each is raised, and the versions it is in.
ERROR_TEXTS = {
    "KV_TOO_SMALL": (
        "KV cache is needed, which is larger than the available KV cache",
        ["v1/core/kv_cache_utils.py"],
    ),
    "NOT_FREE": ("is less than desired", ["v1/worker/utils.py", "v1/worker/cpu_worker.py"]),
    "NO_CACHE_MEMORY": (vllm_internals.NO_CACHE_MEMORY, ["v1/core/kv_cache_utils.py"]),
}
ONLY_IN = {"KV_NOT_FREE": "0.26"}  # gone from later versions: nothing to find


@pytest.mark.parametrize("name", sorted(ERROR_TEXTS))
def test_the_memory_errors_the_app_reads_are_still_raised_with_that_text(name: str) -> None:
    import vllm

    phrase, files = ERROR_TEXTS[name]
    root = Path(vllm.__file__).parent
    sources = " ".join((root / f).read_text(encoding="utf-8") for f in files if (root / f).exists())
    flat = " ".join(sources.replace('"\n', "").replace('f"', "").split())
    assert " ".join(phrase.split()) in flat, moved(name, f"{files} lack it")
    assert set(ONLY_IN) | set(ERROR_TEXTS) == {n for n in vllm_internals.__all__ if n.isupper()}, (
        "every error text has a row here"
    )
