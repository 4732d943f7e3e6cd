"""Checks before the engine loads: the settings against the model's config and the hardware.

Usage::

    plan = preflight(settings)      # raises SettingsError: one line, the ERNIE_* name and a fix
    plan.settings, plan.shape, plan.hardware, plan.memory_share, plan.sources()

Everything here is fast (config.json and a look at the machine): a deployment mistake
is refused in a second, not after minutes of loading weights. What only the loaded
engine can know (the memory its activations take) is left to ``engine.vllm_door.failures``.
"""

from __future__ import annotations

import logging

from engine.model.files import ModelShape, read_model_config, refuse
from engine.model.memory import (
    BLOCK_MULTIPLE,
    DEFAULT_BLOCK_SIZE,
    GiB,
    kv_gib_that_fits,
    kv_tokens,
    share_that_fits,
)
from engine.model.system_prompts import resolve_system_prompt
from engine.plan.batch import TYPICAL_CHAT_TOKENS
from engine.plan.plan import Plan, core_tokens, holds
from engine.vllm_door.hardware import Hardware, driver_problem
from settings.settings import Settings, SettingsError, env_name

__all__ = ["check_plan", "preflight"]

logger = logging.getLogger(__name__)


# --- the checks -----------------------------------------------------------------------
def _divisors(n: int, most: int) -> list[int]:
    return [d for d in range(1, max(1, most) + 1) if n % d == 0]


def _fit_model_len(settings: Settings, shape: ModelShape) -> Settings:
    longest = shape.max_position_embeddings
    if longest is None or settings.max_model_len <= longest:
        return settings
    if settings.origins["max_model_len"].startswith("profile"):
        logger.info(
            "max_model_len: the profile's %d capped at the model's %d",
            settings.max_model_len,
            longest,
        )
        origin = f"{settings.origins['max_model_len']}, capped at the model's"
        fitted = settings.with_values(origin, max_model_len=longest)
        if fitted.max_tokens >= longest:
            raise refuse(
                "max_tokens",
                fitted.max_tokens,
                f"the model holds {longest} tokens",
                f"lower it, for example to {longest // 4}",
            )
        return fitted
    raise refuse(
        "max_model_len",
        settings.max_model_len,
        f"the model's positions end at {longest} (max_position_embeddings)",
        f"use at most {longest}",
    )


def _check_parallel(settings: Settings, shape: ModelShape | None, hw: Hardware) -> None:
    tp, pp = settings.tensor_parallel_size, settings.pipeline_parallel_size
    gpus = len(hw.gpus)
    if hw.cpu and tp > 1:
        raise refuse(
            "tensor_parallel_size",
            tp,
            "the CPU backend runs one model copy on one device",
            "use 1 (or run on GPUs)",
        )
    if shape is not None and shape.num_attention_heads % tp:
        fits = _divisors(shape.num_attention_heads, gpus if not hw.cpu else 1)[-1]
        raise refuse(
            "tensor_parallel_size",
            tp,
            f"it must divide the model's {shape.num_attention_heads} attention heads",
            f"use {fits}",
        )
    if shape is not None and pp > shape.num_hidden_layers:
        raise refuse(
            "pipeline_parallel_size",
            pp,
            f"the model has only {shape.num_hidden_layers} layers to split",
            "use 1, or at most the layer count with as many GPUs",
        )
    if not hw.cpu and tp * pp > gpus:
        heads = shape.num_attention_heads if shape else tp
        fits = _divisors(heads, gpus // pp if pp <= gpus else 1)[-1]
        field, value = ("tensor_parallel_size", tp) if tp > 1 else ("pipeline_parallel_size", pp)
        raise refuse(
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
        raise refuse(
            "block_size",
            settings.block_size,
            f"the {hw.backend.upper()} attention kernels take multiples of {multiple}",
            f"use {suggestion}, or unset it for {DEFAULT_BLOCK_SIZE[hw.backend]}",
        )
    if plan.dtype not in hw.dtypes:
        raise refuse(
            "dtype",
            settings.dtype,
            f"{plan.dtype} does not run on {hw.device}",
            f"use {hw.dtypes[0]}",
        )


def _check_driver(hw: Hardware) -> None:
    if (problem := driver_problem(hw.driver, hw.cuda)) is not None:
        raise SettingsError(problem)


def _check_memory(plan: Plan) -> None:
    settings, hw, share = plan.settings, plan.hardware, plan.memory_share
    if settings.kv_cache_gb is not None:
        available = hw.ram_available_bytes if hw.cpu else min(g.free_bytes for g in hw.gpus)
        if settings.kv_cache_gb * GiB > available:
            raise refuse(
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
        raise refuse(
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
    per_token = plan.shape.kv_bytes_per_token(plan.dtype, settings.tensor_parallel_size)
    tokens = kv_tokens(
        int(settings.kv_cache_gb * GiB), block_size=plan.block_size, bytes_per_token=per_token
    )
    if tokens >= settings.max_model_len:
        return
    if tokens < plan.block_size:
        fix = f"raise {env_name('kv_cache_gb')}"
    else:
        fix = f"use at most {tokens}, or raise {env_name('kv_cache_gb')}"
    raise refuse(
        "max_model_len",
        settings.max_model_len,
        f"one request of this length needs more KV cache than "
        f"{env_name('kv_cache_gb')}={settings.kv_cache_gb} holds ({tokens} tokens)",
        fix,
    )


def check_placement(plan: Plan) -> None:
    """Refuse K engine cores that cannot run: one line naming ERNIE_ENGINES and a fix."""
    settings, count = plan.settings, plan.engines
    if count == 1:
        return
    if settings.engine == "remote":
        raise refuse("engines", count, "the remote servers run the engines", "unset it")
    tokens = core_tokens(plan, count)
    if holds(plan, tokens):
        return
    fits = [k for k in range(1, count) if holds(plan, core_tokens(plan, k))]
    raise refuse(
        "engines",
        count,
        f"each core's share of memory leaves room for about {tokens:,} tokens of KV cache, "
        f"fewer than one request of {env_name('max_model_len')}={settings.max_model_len}",
        f"use {fits[-1] if fits else 1}, or lower {env_name('max_model_len')}",
    )


def check_batch(plan: Plan) -> None:
    """Refuse an ``ERNIE_MAX_NUM_SEQS`` whose chats the core's KV cache cannot hold (known
    before loading on a GPU, or with ``ERNIE_KV_CACHE_GB``): one line and a fix."""
    wanted, tokens = plan.settings.max_num_seqs, core_tokens(plan, plan.engines)
    if wanted is None or tokens is None or tokens // TYPICAL_CHAT_TOKENS >= wanted:
        return
    most = max(1, tokens // TYPICAL_CHAT_TOKENS)
    raise refuse(
        "max_num_seqs",
        wanted,
        f"each engine core's KV cache holds about {tokens:,} tokens, {most:,} chats of "
        f"{TYPICAL_CHAT_TOKENS:,}",
        f"use at most {most:,}, unset it, or give the KV cache more memory "
        f"({env_name('gpu_memory_utilization')}, {env_name('kv_cache_gb')})",
    )


def check_plan(plan: Plan) -> Plan:
    """Every check that needs no loaded engine; returns the plan with profile values fitted."""
    if plan.shape is not None:
        plan = Plan(_fit_model_len(plan.settings, plan.shape), plan.shape, plan.hardware)
    _check_driver(plan.hardware)
    _check_parallel(plan.settings, plan.shape, plan.hardware)
    _check_device(plan)
    _check_memory(plan)
    check_placement(plan)
    check_batch(plan)
    return plan


def preflight(settings: Settings) -> Plan:
    """Read the model's config and the machine, and check the settings against both."""
    resolve_system_prompt(settings.system_prompt)  # a prompt name that does not exist
    config = read_model_config(settings)
    shape = ModelShape.from_config(config) if config is not None else None
    plan = Plan(settings, shape, Hardware.probe())
    if settings.engine == "remote":  # the servers load the model; here only its tokenizer
        return plan
    return check_plan(plan)
