"""The chat settings panel: its widgets from the settings and the model, and the
per-chat options its values give.

The values arrive from the client as it chooses to send them: only the panel's own
choices and ranges are taken (the operator's system prompt and the reply length limit
cannot be walked around by a hand-made message).
"""

from __future__ import annotations

from typing import Any

import chainlit as cl
from chainlit.input_widget import Select, Slider

from engine import ChatOptions, ModelFacts, available_system_prompts
from settings.settings import Settings

from ..errors import PanelValueError
from ..words import t

__all__ = ["NO_SYSTEM_PROMPT", "options_from", "send_settings_panel"]

NO_SYSTEM_PROMPT = "none"  # the panel's value for "no system prompt"
MAX_TEMPERATURE, MIN_TOP_P, MIN_REPLY_TOKENS = 2.0, 0.05, 16
PANEL_FIELDS = ("temperature", "top_p", "max_tokens", "system_prompt")  # what it sends


def _first_set(*values: float | None) -> float:
    """The first value that is set: 0 is a value (greedy temperature), None is not."""
    return next(v for v in values if v is not None)


def _shortest(longest: int) -> int:
    """The slider's start: ``MIN_REPLY_TOKENS``, or the longest reply where it is shorter."""
    return min(MIN_REPLY_TOKENS, longest)


def _system_prompts(current: str) -> dict[str, str]:
    prompts = {t("no_system_prompt"): NO_SYSTEM_PROMPT}
    prompts.update({name: name for name in available_system_prompts()})
    if current not in prompts.values():
        prompts[t("custom_system_prompt")] = current
    return prompts


async def send_settings_panel(settings: Settings, model: ModelFacts) -> None:
    defaults = model.sampling_defaults
    temperature = _first_set(settings.temperature, defaults.get("temperature"), 1.0)
    top_p = _first_set(settings.top_p, defaults.get("top_p"), 1.0)
    widgets = [
        Slider(
            id="temperature",
            label=t("temperature"),
            min=0,
            max=MAX_TEMPERATURE,
            step=0.05,
            initial=temperature,
        ),
        Slider(id="top_p", label=t("top_p"), min=MIN_TOP_P, max=1, step=0.05, initial=top_p),
        Slider(
            id="max_tokens",
            label=t("max_tokens"),
            min=_shortest(settings.max_tokens),
            step=16,
            max=settings.max_tokens,  # the longest reply: no chat's is longer
            initial=settings.reply_tokens or settings.max_tokens,
        ),
        Select(
            id="system_prompt",
            label=t("system_prompt"),
            items=_system_prompts(settings.system_prompt),
            initial_value=settings.system_prompt or NO_SYSTEM_PROMPT,
        ),
    ]
    await cl.ChatSettings(widgets).send()


def _number(values: dict[str, Any], name: str, low: float, high: float) -> float:
    value = values.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise PanelValueError(name)
    return float(value)


def options_from(values: Any, settings: Settings) -> ChatOptions:
    """The chat's options from the panel's values; ``PanelValueError`` for anything the
    panel itself cannot send (the values come from the client, not from the panel)."""
    if not isinstance(values, dict) or not set(values) <= set(PANEL_FIELDS):
        raise PanelValueError(None)
    prompt = values.get("system_prompt")
    allowed = {NO_SYSTEM_PROMPT, settings.system_prompt, *available_system_prompts()}
    if prompt not in allowed:
        raise PanelValueError("system_prompt")
    longest = settings.max_tokens
    max_tokens = _number(values, "max_tokens", _shortest(longest), longest)
    if max_tokens != int(max_tokens):
        raise PanelValueError("max_tokens")
    return ChatOptions(
        temperature=_number(values, "temperature", 0, MAX_TEMPERATURE),
        top_p=_number(values, "top_p", MIN_TOP_P, 1),
        max_tokens=int(max_tokens),
        system_prompt="" if prompt == NO_SYSTEM_PROMPT else prompt,
    )
