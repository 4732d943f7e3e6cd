"""Deployment mistakes are refused before the engine loads, in one line with the fix."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engine.cli import main
from engine.model.files import ModelShape
from engine.plan.plan import Plan
from engine.plan.preflight import check_plan
from engine.vllm_door.failures import describe_failure
from engine.vllm_door.hardware import Gpu, Hardware, driver_problem
from settings.settings import SettingsError
from testing.demo import hermetic_settings

GiB = 1 << 30
ERNIE_03B = ModelShape(
    max_position_embeddings=131072,
    num_attention_heads=16,
    num_key_value_heads=2,
    num_hidden_layers=18,
    head_dim=128,
    dtype="bfloat16",
)


@pytest.fixture
def engine_loads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every attempt to build vLLM's engine, refused."""
    from vllm.v1.engine.async_llm import AsyncLLM

    calls: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        calls.append(args)
        raise AssertionError("the engine was loaded")

    monkeypatch.setattr(AsyncLLM, "from_engine_args", refuse)
    return calls


def model_without(demo_model: Path, tmp_path: Path, *names: str) -> str:
    copy = tmp_path / "model"
    shutil.copytree(demo_model, copy)
    for name in names:
        (copy / name).unlink()
    return str(copy)


# Each: extra environment (given the demo model), the variable the line must name, and
# words of the reason or the fix.
BAD_CONFIGS: dict[str, tuple[Callable[[Path, Path], dict[str, str]], str, str]] = {
    "max_model_len beyond the model's positions": (
        lambda m, t: {"ERNIE_MAX_MODEL_LEN": "262144"},
        "ERNIE_MAX_MODEL_LEN",
        "use at most 131072",
    ),
    "tensor parallel not dividing the heads": (
        lambda m, t: {"ERNIE_TENSOR_PARALLEL_SIZE": "3"},
        "ERNIE_TENSOR_PARALLEL_SIZE",
        "use 1",
    ),
    "tensor parallel on the CPU backend": (
        lambda m, t: {"ERNIE_TENSOR_PARALLEL_SIZE": "2"},
        "ERNIE_TENSOR_PARALLEL_SIZE",
        "CPU backend",
    ),
    "pipeline stages beyond the layers": (
        lambda m, t: {"ERNIE_PIPELINE_PARALLEL_SIZE": "3"},
        "ERNIE_PIPELINE_PARALLEL_SIZE",
        "only 2 layers",
    ),
    "memory share of zero": (
        lambda m, t: {"ERNIE_GPU_MEMORY_UTILIZATION": "0"},
        "ERNIE_GPU_MEMORY_UTILIZATION",
        "greater than 0",
    ),
    "memory share above one": (
        lambda m, t: {"ERNIE_GPU_MEMORY_UTILIZATION": "1.5"},
        "ERNIE_GPU_MEMORY_UTILIZATION",
        "less than or equal to 1",
    ),
    "memory share larger than what is free": (
        lambda m, t: {"ERNIE_GPU_MEMORY_UTILIZATION": "1.0"},
        "ERNIE_GPU_MEMORY_UTILIZATION",
        "is free",
    ),
    "block size the CPU kernels do not take": (
        lambda m, t: {"ERNIE_BLOCK_SIZE": "48"},
        "ERNIE_BLOCK_SIZE",
        "use 64",
    ),
    "reply as long as the context": (
        lambda m, t: {"ERNIE_MAX_MODEL_LEN": "4096", "ERNIE_MAX_TOKENS": "4096"},
        "ERNIE_MAX_TOKENS",
        "leaves no room",
    ),
    "unknown dtype": (lambda m, t: {"ERNIE_DTYPE": "float64"}, "ERNIE_DTYPE", "bfloat16"),
    "model folder without config.json": (
        lambda m, t: {"ERNIE_MODEL": model_without(m, t, "config.json")},
        "ERNIE_MODEL",
        "no config.json",
    ),
    "model folder without tokenizer": (
        lambda m, t: {
            "ERNIE_MODEL": model_without(m, t, "tokenizer.json", "tokenizer_config.json")
        },
        "ERNIE_MODEL",
        "no tokenizer files",
    ),
    "model folder that does not exist": (
        lambda m, t: {"ERNIE_MODEL": "./models/ernie"},
        "ERNIE_MODEL",
        "no such folder",
    ),
    "settings file that does not exist": (
        lambda m, t: {"ERNIE_ENV_FILE": str(t / "prod.env")},
        "ERNIE_ENV_FILE",
        "no such file",
    ),
    "system prompt that does not exist": (
        lambda m, t: {"ERNIE_SYSTEM_PROMPT": "klingon"},
        "ERNIE_SYSTEM_PROMPT",
        "no such prompt",
    ),
    "KV cache smaller than one full request": (
        lambda m, t: {"ERNIE_KV_CACHE_GB": "0.001", "ERNIE_MAX_MODEL_LEN": "16384"},
        "ERNIE_MAX_MODEL_LEN",
        "use at most 1024",  # 0.001 GiB / (128 tokens x 1 KiB) = 8 blocks of 128
    ),
    "KV cache larger than the free memory": (
        lambda m, t: {"ERNIE_KV_CACHE_GB": "100000"},
        "ERNIE_KV_CACHE_GB",
        "is free",
    ),
    "unknown profile": (lambda m, t: {"ERNIE_PROFILE": "fastest"}, "ERNIE_PROFILE", "balanced"),
    "misspelled setting": (
        lambda m, t: {"ERNIE_MAX_MODLE_LEN": "4096"},
        "ERNIE_MAX_MODLE_LEN",
        "did you mean ERNIE_MAX_MODEL_LEN",
    ),
    "hub model while offline": (
        lambda m, t: {"ERNIE_MODEL": "baidu/not-cached-here", "HF_HUB_OFFLINE": "1"},
        "ERNIE_MODEL",
        "HF_ENDPOINT",
    ),
    # Said after one try (the hub client retried for 24-38 s before it said so).
    "hub model, the hub's name unknown": (
        lambda m, t: {"ERNIE_MODEL": "baidu/not-cached-here", "HF_ENDPOINT": "https://hub.invalid"},
        "ERNIE_MODEL",
        "the hub cannot be reached",
    ),
}


def _cache_only() -> Any:
    """The hub client's download, for the cache alone: asking the hub fails the test (its
    retries were what took the answer 24-38 s)."""
    import huggingface_hub

    real = huggingface_hub.hf_hub_download

    def cache_only(*args: Any, **kwargs: Any) -> Any:
        assert kwargs.get("local_files_only"), "the hub was asked, with its retries"
        return real(*args, **kwargs)

    return cache_only


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_bad_configuration_exits_2_with_one_line_before_loading(
    case: str,
    demo_model: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    engine_loads: list[object],
) -> None:
    make_env, name, words = BAD_CONFIGS[case]
    monkeypatch.setenv("ERNIE_MODEL", str(demo_model))
    monkeypatch.setenv("ERNIE_MAX_MODEL_LEN", "2048")
    env = make_env(demo_model, tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if "HF_HUB_OFFLINE" in env:  # read when the hub module loads
        monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    if "HF_ENDPOINT" in env:
        monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", env["HF_ENDPOINT"])
        for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(proxy, raising=False)
        monkeypatch.setattr("huggingface_hub.hf_hub_download", _cache_only())

    code = main(["check", "--load"])

    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {name}="), lines[0]
    assert words in lines[0], lines[0]
    assert engine_loads == []


def test_profile_value_is_fitted_to_the_model_and_explicit_values_win(
    demo_model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ERNIE_MODEL", str(demo_model))
    monkeypatch.setenv("ERNIE_PROFILE", "high-concurrency")
    monkeypatch.setenv("ERNIE_MAX_NUM_SEQS", "64")
    monkeypatch.setenv("ERNIE_KV_CACHE_GB", "0.5")  # not a share of what the session leaves
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert "ERNIE_PROFILE                    'high-concurrency'  # environment" in out
    assert "ERNIE_MAX_MODEL_LEN              4096  # profile high-concurrency" in out
    assert "ERNIE_MAX_NUM_SEQS               64  # environment" in out
    assert "checks passed" in out


def test_the_cpu_backend_s_share_of_ram_is_its_own_default() -> None:
    """A profile's GPU share of RAM would not be free: the CPU backend takes 0.3, and says so."""
    hardware = Hardware("cpu", (), 24 * GiB, 20 * GiB, ("bfloat16",), cpus=2)
    cpu = Plan(hermetic_settings(), ERNIE_03B, hardware)
    assert cpu.memory_share == 0.3
    assert cpu.sources()["gpu_memory_utilization"] == "CPU backend default"


def plan(
    shape: ModelShape | None = ERNIE_03B, gpus: int = 1, cpus: int = 16, **values: object
) -> Plan:
    gpu = Gpu("NVIDIA H200", total_bytes=140 * GiB, free_bytes=139 * GiB, capability=(9, 0))
    dtypes = ("bfloat16", "float16")
    hardware = Hardware("gpu", (gpu,) * gpus, 256 * GiB, 200 * GiB, dtypes, cpus=cpus)
    return Plan(hermetic_settings(**values), shape, hardware)


@pytest.mark.parametrize(
    ("values", "gpus", "words"),
    [
        ({"tensor_parallel_size": 2}, 1, "ERNIE_TENSOR_PARALLEL_SIZE=2: 2 GPUs needed"),
        ({"tensor_parallel_size": 3}, 4, "divide the model's 16 attention heads; use 4"),
        ({"pipeline_parallel_size": 2}, 1, "ERNIE_PIPELINE_PARALLEL_SIZE=2: 2 GPUs needed"),
        ({"block_size": 24}, 1, "ERNIE_BLOCK_SIZE=24: the GPU attention kernels take multiples"),
        ({"gpu_memory_utilization": 0.995}, 1, "use 0.94"),
    ],
)
def test_gpu_checks(values: dict[str, object], gpus: int, words: str) -> None:
    """The same checks against a described two-GPU-class machine (no GPU here)."""
    with pytest.raises(SettingsError, match=words.replace("(", r"\(")):
        check_plan(plan(gpus=gpus, **values))


def test_bfloat16_is_refused_on_a_gpu_without_it() -> None:
    old = Gpu("Tesla V100", total_bytes=32 * GiB, free_bytes=31 * GiB, capability=(7, 0))
    hardware = Hardware("gpu", (old,), 64 * GiB, 60 * GiB, ("float16", "float32"))
    with pytest.raises(SettingsError, match="ERNIE_DTYPE='auto': bfloat16 does not run"):
        check_plan(Plan(hermetic_settings(), ERNIE_03B, hardware))


def test_an_nvidia_driver_too_old_for_the_lock_stops_the_start_in_one_line() -> None:
    """The GPU lock's torch is built for CUDA 13: a 550 driver would fail inside torch."""
    gpu = Gpu("NVIDIA H200", total_bytes=140 * GiB, free_bytes=139 * GiB, capability=(9, 0))
    dtypes = ("bfloat16", "float16")
    old = Hardware("gpu", (gpu,), 256 * GiB, 200 * GiB, dtypes, "550.54.15", "13.0")
    with pytest.raises(SettingsError) as info:
        check_plan(Plan(hermetic_settings(), ERNIE_03B, old))
    message = str(info.value)
    assert "\n" not in message
    assert "NVIDIA driver 550.54.15 is too old" in message
    assert "needs driver 580 or later" in message and "TARGET=cpu" in message
    assert "ERNIE_ENGINE=remote" in message
    new = Hardware("gpu", (gpu,), 256 * GiB, 200 * GiB, dtypes, "580.159.04", "13.0")
    assert check_plan(Plan(hermetic_settings(), ERNIE_03B, new)).hardware.driver == "580.159.04"
    assert driver_problem("535.104.05", "12.8") is None  # a CUDA 12 build on a 535 driver
    assert driver_problem("470.82.01", "12.1") is not None
    assert driver_problem(None, None) is None  # the CPU: nothing to check


# --- engine errors, as vLLM words them ---------------------------------------------------
def vllm_error(function: Callable[[], object]) -> str:
    with pytest.raises(ValueError) as info:
        function()
    return f"ValueError: {info.value}"


def test_kv_cache_too_small_names_the_largest_length_that_fits() -> None:
    from vllm.v1.core.kv_cache_utils import _check_enough_kv_cache_memory

    cause = vllm_error(
        lambda: _check_enough_kv_cache_memory(
            available_memory=GiB // 2,
            get_needed_memory=lambda: 2 * GiB,
            max_model_len=131072,
            estimate_max_model_len=lambda memory: 29120,
        )
    )
    line = describe_failure(
        RuntimeError("Engine core initialization failed. See root cause above."),
        hermetic_settings(max_model_len=131072),
        share=0.05,
        root_cause=cause,
    )
    assert line.startswith("ERNIE_MAX_MODEL_LEN=131072: one request of this length needs 2.0")
    assert "use at most 29120" in line and "ERNIE_GPU_MEMORY_UTILIZATION=0.05" in line


def test_memory_taken_by_others_names_a_share_that_fits() -> None:
    from vllm.v1.worker.utils import request_memory

    snapshot = SimpleNamespace(total_memory=140 * GiB, free_memory=70 * GiB, device_="cuda:0")
    cause = vllm_error(
        lambda: request_memory(snapshot, SimpleNamespace(gpu_memory_utilization=0.9))  # type: ignore[arg-type]
    )
    line = describe_failure(RuntimeError("x"), hermetic_settings(), share=0.9, root_cause=cause)
    assert line.startswith("ERNIE_GPU_MEMORY_UTILIZATION=0.9: 126.0 GiB wanted but only 70.0")
    assert "use 0.47" in line


def test_out_of_memory_while_loading_suggests_more_gpus() -> None:
    import torch

    error = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB.")
    line = describe_failure(error, hermetic_settings(), share=0.9)
    assert "out of memory while loading" in line
    assert "ERNIE_TENSOR_PARALLEL_SIZE=2" in line


@pytest.mark.engine
def test_engine_process_failure_is_translated_from_its_root_cause(
    load_checks: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    """vLLM's CPU worker refuses a share too small for itself; the one line says why."""
    result = load_checks["share too small"]
    assert result.returncode == 1, result.stderr[-2000:]
    error = next(line for line in result.stderr.splitlines() if line.startswith("error:"))
    assert "ERNIE_GPU_MEMORY_UTILIZATION=0.01: the engine itself takes" in error, error
    assert "or more" in error
    assert "on kv cache allocation" in result.stdout  # vLLM's own words stay in the log


def test_the_app_stops_at_start_with_the_same_line(
    load_checks: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    """``chainlit run app.py`` with a bad setting: exit 2, one line on stderr, no server
    (run at collection, ``testing.load_checks``)."""
    result = load_checks["bad setting at start"]
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [
        "error: ERNIE_BLOCK_SIZE=48: the CPU attention kernels take multiples of 32; "
        "use 64, or unset it for 128"
    ]


def test_a_profile_length_beyond_the_model_is_lowered_to_the_model() -> None:
    short = ModelShape(32768, 16, 2, 18, 128, "bfloat16")
    fitted = check_plan(plan(short, profile="long-context"))
    assert fitted.settings.max_model_len == 32768
    with pytest.raises(SettingsError, match="ERNIE_MAX_MODEL_LEN=65536: the model's positions"):
        check_plan(plan(short, profile="long-context", max_model_len=65536))


def test_engine_cores_take_the_gpus_in_turn_and_split_what_they_share() -> None:
    cores = plan(gpus=2, engines=4).placement
    assert [cores.devices(i) for i in range(4)] == ["0", "1", "0", "1"]
    assert cores.per_device == 2 and cores.share(0.9) == 0.45
    assert cores.kv_cache_gib(8.0) == 4.0
    alone = plan(engines=1).placement
    assert alone.devices(0) is None and alone.share(0.9) == 0.9


def test_the_default_engine_cores_follow_the_model_the_gpus_and_the_cpus() -> None:
    """Up to four cores a GPU for a small model (the 0.3B on an H100 with 16 CPUs: four
    cores of two workers held 400 new chats a second, two cores 300), given 4 CPU cores a
    core and room for each core's KV cache; else one."""
    small = replace(ERNIE_03B, parameters=361_821_120)  # 0.67 GiB in bfloat16
    assert plan(small).engines == 4 and plan(small).workers == 2  # 16 CPUs: 4 a core
    assert "small model (0.67 GiB on 1 x 140 GiB GPU" in plan(small).sources()["engines"]
    assert "size is unknown" in plan(ERNIE_03B).sources()["engines"]
    assert plan(small, gpus=2, cpus=32).engines == 8
    assert plan(small, gpus=2, cpus=64).engines == 8  # four a GPU at most
    assert plan(small, gpus=2, cpus=16).engines == 4
    assert plan(small, cpus=8).engines == 2 and plan(small, cpus=8).workers == 2
    assert plan(small, cpus=4).engines == 1 and plan(small, cpus=4).workers == 2
    assert plan(small, cpus=2).engines == 1 and plan(small, cpus=2).workers == 1
    assert plan(small, engines=2).workers == 2  # 8 CPU cores a core: two workers, as before
    assert plan(replace(ERNIE_03B, parameters=8_000_000_000)).engines == 1  # 15 GiB: not small
    assert plan(ERNIE_03B).engines == 1  # the size unknown
    assert plan(small, engines=1).engines == 1  # set by hand
    assert plan(small, engine="remote", remote_url="http://gpu:8000").engines == 1
    # 1 GiB of KV cache holds ~58k tokens; split two ways, less than one 32k request each.
    assert plan(small, kv_cache_gb=1.0, max_model_len=32768).engines == 1
    cpu = Hardware("cpu", (), 24 * GiB, 20 * GiB, ("bfloat16",), cpus=64)
    assert Plan(hermetic_settings(), small, cpu).engines == 1


@pytest.mark.parametrize(
    ("values", "words"),
    [
        # 1 GiB of KV cache split 8 ways: 7,281 tokens a core; 3 cores keep 19,418 each
        ({"engines": 8, "kv_cache_gb": 1.0}, "about 7,281 tokens of KV cache.*use 3"),
    ],
)
def test_engine_cores_that_cannot_fit_are_refused(values: dict[str, object], words: str) -> None:
    with pytest.raises(SettingsError, match=words):
        check_plan(plan(**values))
