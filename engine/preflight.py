"""Checks before the engine loads: the settings against the model's config and the hardware.

Usage::

    plan = preflight(settings)      # raises SettingsError: one line, the ERNIE_* name and a fix
    plan.settings, plan.shape, plan.hardware

Everything here is fast (config.json and a look at the machine): a deployment mistake
is refused in a second, not after minutes of loading weights. What only the loaded
engine can know (the memory its activations take) is left to ``engine.failures``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .failures import hub_unreachable, kv_gib_that_fits, share_that_fits
from .settings import Settings, SettingsError, env_name, setting_sources

__all__ = ["Gpu", "Hardware", "ModelShape", "Plan", "check_plan", "preflight"]

logger = logging.getLogger(__name__)

GiB = 1 << 30
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")
# The KV cache block sizes the attention kernels take (vLLM 0.29: CPU_ATTN MultipleOf(32),
# FLASH_ATTN MultipleOf(16)), and the sizes vLLM picks when none is set.
BLOCK_MULTIPLE = {"cpu": 32, "gpu": 16}
DEFAULT_BLOCK_SIZE = {"cpu": 128, "gpu": 16}
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
MIN_BF16_CAPABILITY = (8, 0)


@dataclass(frozen=True)
class ModelShape:
    """What the checks need from the model's config.json."""

    max_position_embeddings: int | None
    num_attention_heads: int
    num_key_value_heads: int
    num_hidden_layers: int
    head_dim: int
    dtype: str  # the checkpoint's own dtype

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ModelShape:
        text = config.get("text_config", config)  # multimodal configs nest the LLM's
        heads = int(text["num_attention_heads"])
        return cls(
            max_position_embeddings=text.get("max_position_embeddings"),
            num_attention_heads=heads,
            num_key_value_heads=int(text.get("num_key_value_heads") or heads),
            num_hidden_layers=int(text["num_hidden_layers"]),
            head_dim=int(text.get("head_dim") or text["hidden_size"] // heads),
            dtype=str(text.get("torch_dtype") or text.get("dtype") or "bfloat16"),
        )

    def kv_bytes_per_token(self, dtype: str, tensor_parallel_size: int = 1) -> int:
        """KV cache bytes one token takes on one device (keys and values, every layer)."""
        kv_heads = max(1, self.num_key_value_heads // tensor_parallel_size)
        return 2 * self.num_hidden_layers * kv_heads * self.head_dim * DTYPE_BYTES[dtype]


@dataclass(frozen=True)
class Gpu:
    name: str
    total_bytes: int
    free_bytes: int
    capability: tuple[int, int]


@dataclass(frozen=True)
class Hardware:
    """The machine as vLLM will see it."""

    backend: str  # "cpu" or "gpu"
    gpus: tuple[Gpu, ...]
    ram_total_bytes: int
    ram_available_bytes: int
    dtypes: tuple[str, ...]  # the dtypes the device computes in

    @property
    def cpu(self) -> bool:
        return self.backend == "cpu"

    @property
    def device(self) -> str:
        if self.cpu:
            memory = self.ram_total_bytes / GiB
            return f"CPU ({os.cpu_count()} cores, {memory:.1f} GiB on its memory node)"
        names = sorted({gpu.name for gpu in self.gpus})
        return f"{len(self.gpus)} x {', '.join(names)}"

    @classmethod
    def probe(cls) -> Hardware:
        """Look at the machine without creating a CUDA context (vLLM forks after this)."""
        import psutil
        from vllm.platforms import current_platform

        if current_platform.is_cpu():
            # The memory node vLLM's CPU worker reserves from, read the way it reads it.
            from vllm.utils.cpu_resource_utils import get_memory_node_info

            node = get_memory_node_info(0)
            dtypes = tuple(str(d).removeprefix("torch.") for d in current_platform.supported_dtypes)
            return cls("cpu", (), node.total_memory, node.available_memory, dtypes)
        memory = psutil.virtual_memory()
        gpus = tuple(
            _probe_gpu(current_platform, i) for i in range(current_platform.device_count())
        )
        bf16 = bool(gpus) and all(g.capability >= MIN_BF16_CAPABILITY for g in gpus)
        dtypes = ("bfloat16", "float16", "float32") if bf16 else ("float16", "float32")
        return cls("gpu", gpus, memory.total, memory.available, dtypes)


def _probe_gpu(platform: Any, index: int) -> Gpu:
    from vllm.third_party import pynvml  # vLLM's own copy: no CUDA context

    nvml: Any = pynvml
    capability = platform.get_device_capability(index)
    nvml.nvmlInit()
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(platform.device_id_to_physical_device_id(index))
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        name = nvml.nvmlDeviceGetName(handle)
    finally:
        nvml.nvmlShutdown()
    return Gpu(
        name=name.decode() if isinstance(name, bytes) else str(name),
        total_bytes=int(memory.total),
        free_bytes=int(memory.free),
        capability=(capability.major, capability.minor) if capability else (0, 0),
    )


@dataclass(frozen=True)
class Plan:
    """Settings that passed the checks, with what they were checked against."""

    settings: Settings
    shape: ModelShape | None  # None: the config could not be read before loading
    hardware: Hardware

    @property
    def dtype(self) -> str:
        """The dtype the weights and the KV cache will have."""
        if self.settings.dtype != "auto":
            return self.settings.dtype
        own = self.shape.dtype if self.shape else "bfloat16"
        return own if own in DTYPE_BYTES else "bfloat16"

    @property
    def block_size(self) -> int:
        return self.settings.block_size or DEFAULT_BLOCK_SIZE[self.hardware.backend]

    @property
    def memory_share(self) -> float:
        from .engine_args import memory_share

        return memory_share(self.settings, cpu=self.hardware.cpu)

    def sources(self) -> dict[str, str]:
        """Where each value came from, with unset ones credited to whoever picks them."""
        settings = self.settings
        sources = setting_sources(settings)
        if settings.dtype == "auto":
            sources["dtype"] = "the model's own"
        for name, source in sources.items():
            if getattr(settings, name) is not None:
                continue
            if name == "gpu_memory_utilization":
                sources[name] = (
                    "CPU backend default" if self.hardware.cpu else f"profile {settings.profile}"
                )
            elif source == "default":
                sources[name] = "backend default"
        return sources


def _refuse(field: str, value: Any, why: str, fix: str) -> SettingsError:
    return SettingsError(f"{env_name(field)}={value!r}: {why}; {fix}")


# --- the model's files ----------------------------------------------------------------
def _is_local(value: str) -> bool:
    return Path(value).expanduser().exists() or value.startswith(("/", ".", "~"))


def _local_config(value: str) -> dict[str, Any]:
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise _refuse("model", value, "no such folder", "give the folder of the model, or a hub id")
    config = folder / "config.json"
    if not config.is_file():
        raise _refuse(
            "model",
            value,
            "no config.json in this folder",
            "give the folder that holds config.json and the weights (the model's own release)",
        )
    return dict(json.loads(config.read_text(encoding="utf-8")))


def _check_tokenizer(settings: Settings) -> None:
    field = "tokenizer" if settings.tokenizer else "model"
    source = settings.tokenizer or settings.model
    if not _is_local(source):
        return  # a hub id: checked while loading
    folder = Path(source).expanduser()
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise _refuse(
            field,
            source,
            "no tokenizer files (tokenizer.json or tokenizer.model) in this folder",
            "copy them from the model's release, or set ERNIE_TOKENIZER to a folder or hub "
            "id that has them",
        )


def _download_config(download: Any, settings: Settings) -> str:
    """The cached config.json at once if there is one; else ask the hub, with its retry
    warnings kept out of the operator's way (the outcome is reported in one line)."""
    from huggingface_hub.errors import LocalEntryNotFoundError

    with contextlib.suppress(LocalEntryNotFoundError):
        return str(
            download(
                settings.model, "config.json", revision=settings.revision, local_files_only=True
            )
        )
    hub_logger = logging.getLogger("huggingface_hub")
    level = hub_logger.level
    hub_logger.setLevel(logging.ERROR)
    try:
        return str(download(settings.model, "config.json", revision=settings.revision))
    finally:
        hub_logger.setLevel(level)


def _hub_config(settings: Settings) -> dict[str, Any] | None:
    """config.json from the hub (or its cache); None when the hub is not the source."""
    if os.environ.get("VLLM_USE_MODELSCOPE", "").lower() in ("1", "true"):
        logger.info("ModelScope download: the model's config is checked while loading")
        return None
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        path = _download_config(hf_hub_download, settings)
    except LocalEntryNotFoundError:  # offline, or the hub did not answer
        raise SettingsError(hub_unreachable(settings)) from None
    except RevisionNotFoundError:
        raise _refuse(
            "revision", settings.revision, "no such revision of the model", "unset it for main"
        ) from None
    except EntryNotFoundError:
        raise _refuse(
            "model", settings.model, "the repository has no config.json", "give a model repository"
        ) from None
    except RepositoryNotFoundError:
        raise _refuse(
            "model",
            settings.model,
            "no such model on the hub (or it is private)",
            "check the id, for example baidu/ERNIE-4.5-0.3B-PT, or log in with HF_TOKEN",
        ) from None
    except OSError as exc:  # refused, timed out, a proxy's error page: the same to an operator
        logger.info("model config download failed: %r", exc)
        raise SettingsError(hub_unreachable(settings)) from None
    return dict(json.loads(Path(path).read_text(encoding="utf-8")))


def read_model_config(settings: Settings) -> dict[str, Any] | None:
    """The model's config.json, after checking its folder has what loading needs."""
    local = _is_local(settings.model)
    config = _local_config(settings.model) if local else _hub_config(settings)
    _check_tokenizer(settings)
    return config


# --- the checks -----------------------------------------------------------------------
def _divisors(n: int, most: int) -> list[int]:
    return [d for d in range(1, max(1, most) + 1) if n % d == 0]


def _fit_model_len(settings: Settings, shape: ModelShape) -> Settings:
    longest = shape.max_position_embeddings
    if longest is None or settings.max_model_len <= longest:
        return settings
    if setting_sources(settings)["max_model_len"].startswith("profile"):
        logger.info(
            "max_model_len: the profile's %d capped at the model's %d",
            settings.max_model_len,
            longest,
        )
        fitted = settings.model_copy(update={"max_model_len": longest})
        if fitted.max_tokens >= longest:
            raise _refuse(
                "max_tokens",
                fitted.max_tokens,
                f"the model holds {longest} tokens",
                f"lower it, for example to {longest // 4}",
            )
        return fitted
    raise _refuse(
        "max_model_len",
        settings.max_model_len,
        f"the model's positions end at {longest} (max_position_embeddings)",
        f"use at most {longest}",
    )


def _check_parallel(settings: Settings, shape: ModelShape | None, hw: Hardware) -> None:
    tp, pp = settings.tensor_parallel_size, settings.pipeline_parallel_size
    gpus = len(hw.gpus)
    if hw.cpu and tp > 1:
        raise _refuse(
            "tensor_parallel_size",
            tp,
            "the CPU backend runs one model copy on one device",
            "use 1 (or run on GPUs)",
        )
    if shape is not None and shape.num_attention_heads % tp:
        fits = _divisors(shape.num_attention_heads, gpus if not hw.cpu else 1)[-1]
        raise _refuse(
            "tensor_parallel_size",
            tp,
            f"it must divide the model's {shape.num_attention_heads} attention heads",
            f"use {fits}",
        )
    if shape is not None and pp > shape.num_hidden_layers:
        raise _refuse(
            "pipeline_parallel_size",
            pp,
            f"the model has only {shape.num_hidden_layers} layers to split",
            "use 1, or at most the layer count with as many GPUs",
        )
    if not hw.cpu and tp * pp > gpus:
        heads = shape.num_attention_heads if shape else tp
        fits = _divisors(heads, gpus // pp if pp <= gpus else 1)[-1]
        field, value = ("tensor_parallel_size", tp) if tp > 1 else ("pipeline_parallel_size", pp)
        raise _refuse(
            field,
            value,
            f"{tp * pp} GPUs needed (tensor x pipeline), {gpus} visible",
            f"use {fits if field == 'tensor_parallel_size' else 1}, or make more "
            "GPUs visible (CUDA_VISIBLE_DEVICES)",
        )


def _check_device(plan: Plan) -> None:
    settings, hw = plan.settings, plan.hardware
    multiple = BLOCK_MULTIPLE[hw.backend]
    if settings.block_size is not None and settings.block_size % multiple:
        suggestion = max(multiple, round(settings.block_size / multiple) * multiple)
        raise _refuse(
            "block_size",
            settings.block_size,
            f"the {hw.backend.upper()} attention kernels take multiples of {multiple}",
            f"use {suggestion}, or unset it for {DEFAULT_BLOCK_SIZE[hw.backend]}",
        )
    if plan.dtype not in hw.dtypes:
        raise _refuse(
            "dtype",
            settings.dtype,
            f"{plan.dtype} does not run on {hw.device}",
            f"use {hw.dtypes[0]}",
        )


def _check_memory(plan: Plan, share: float) -> None:
    settings, hw = plan.settings, plan.hardware
    if settings.kv_cache_gb is not None:
        available = hw.ram_available_bytes if hw.cpu else min(g.free_bytes for g in hw.gpus)
        if settings.kv_cache_gb * GiB > available:
            raise _refuse(
                "kv_cache_gb",
                settings.kv_cache_gb,
                f"only {available / GiB:.1f} GiB is free",
                f"use at most {kv_gib_that_fits(available / GiB)}",
            )
        _check_kv_fits(plan)
        return
    if hw.cpu:
        total, free = hw.ram_total_bytes, hw.ram_available_bytes
        what = "of RAM (the CPU backend reads this share of RAM)"
    else:
        total = min(g.total_bytes for g in hw.gpus)
        free = min(g.free_bytes for g in hw.gpus)
        what = "of GPU memory (other processes hold the rest)"
    if share * total > free:
        fits = share_that_fits(free, total)
        fix = f"use {fits}" if fits > 0 else "free memory first"
        raise _refuse(
            "gpu_memory_utilization",
            share,
            f"{share * total / GiB:.1f} GiB wanted but only {free / GiB:.1f} of "
            f"{total / GiB:.1f} GiB is free {what}",
            fix,
        )


def _check_kv_fits(plan: Plan) -> None:
    """With an explicit KV cache size the arithmetic is exact: one full request must fit."""
    settings = plan.settings
    if plan.shape is None or settings.kv_cache_gb is None:
        return
    per_block = plan.block_size * plan.shape.kv_bytes_per_token(
        plan.dtype, settings.tensor_parallel_size
    )
    tokens = int(settings.kv_cache_gb * GiB) // per_block * plan.block_size
    if tokens >= settings.max_model_len:
        return
    if tokens < plan.block_size:
        fix = f"raise {env_name('kv_cache_gb')}"
    else:
        fix = f"use at most {tokens}, or raise {env_name('kv_cache_gb')}"
    raise _refuse(
        "max_model_len",
        settings.max_model_len,
        f"one request of this length needs more KV cache than "
        f"{env_name('kv_cache_gb')}={settings.kv_cache_gb} holds ({tokens} tokens)",
        fix,
    )


def check_plan(plan: Plan, *, share: float) -> Plan:
    """Every check that needs no loaded engine; returns the plan with profile values fitted."""
    if plan.shape is not None:
        plan = Plan(_fit_model_len(plan.settings, plan.shape), plan.shape, plan.hardware)
    _check_parallel(plan.settings, plan.shape, plan.hardware)
    _check_device(plan)
    _check_memory(plan, share)
    return plan


def preflight(settings: Settings) -> Plan:
    """Read the model's config and the machine, and check the settings against both."""
    config = read_model_config(settings)
    shape = ModelShape.from_config(config) if config is not None else None
    plan = Plan(settings, shape, Hardware.probe())
    if settings.engine == "remote":  # the servers load the model; here only its tokenizer
        return plan
    return check_plan(plan, share=plan.memory_share)
