"""The chat settings panel: its widgets from the settings and the model, and the
per-chat options its values give."""

from __future__ import annotations

from typing import Any

import chainlit as cl
from chainlit.input_widget import Select, Slider

from deploy.system_prompts import available_system_prompts
from engine import ChatEngine, ChatOptions

from .i18n import t

__all__ = ["NO_SYSTEM_PROMPT", "options_from", "send_settings_panel"]

NO_SYSTEM_PROMPT = "none"  # the panel's value for "no system prompt"


def _first_set(*values: float | None) -> float:
    """The first value that is set: 0 is a value (greedy temperature), None is not."""
    return next(v for v in values if v is not None)


def _system_prompts(current: str) -> dict[str, str]:
    prompts = {t("no_system_prompt"): NO_SYSTEM_PROMPT}
    prompts.update({name: name for name in available_system_prompts()})
    if current not in prompts.values():
        prompts[t("custom_system_prompt")] = current
    return prompts


async def send_settings_panel(engine: ChatEngine) -> None:
    settings, defaults = engine.settings, engine.model.sampling_defaults
    temperature = _first_set(settings.temperature, defaults.get("temperature"), 1.0)
    top_p = _first_set(settings.top_p, defaults.get("top_p"), 1.0)
    widgets = [
        Slider(
            id="temperature", label=t("temperature"), min=0, max=2, step=0.05, initial=temperature
        ),
        Slider(id="top_p", label=t("top_p"), min=0.05, max=1, step=0.05, initial=top_p),
        Slider(
            id="max_tokens",
            label=t("max_tokens"),
            min=16,
            step=16,
            max=engine.max_model_len // 2,  # the context the backend serves
            initial=settings.max_tokens,
        ),
        Select(
            id="system_prompt",
            label=t("system_prompt"),
            items=_system_prompts(settings.system_prompt),
            initial_value=settings.system_prompt or NO_SYSTEM_PROMPT,
        ),
    ]
    await cl.ChatSettings(widgets).send()


def options_from(values: dict[str, Any]) -> ChatOptions:
    """The chat's options from the panel's values."""
    prompt = values["system_prompt"]
    return ChatOptions(
        temperature=float(values["temperature"]),
        top_p=float(values["top_p"]),
        max_tokens=int(values["max_tokens"]),
        system_prompt="" if prompt == NO_SYSTEM_PROMPT else prompt,
    )
