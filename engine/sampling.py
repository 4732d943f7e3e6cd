"""Sampling parameters for one reply: per-chat options over settings over the model's defaults."""

from __future__ import annotations

from dataclasses import dataclass

from vllm import SamplingParams
from vllm.sampling_params import RequestOutputKind

from engine.model.info import ModelInfo
from settings.settings import Settings

__all__ = ["ChatOptions", "build_sampling_params"]


@dataclass(frozen=True)
class ChatOptions:
    """One chat's overrides; ``None`` means "the setting, or else the model's default"."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    system_prompt: str | None = None  # a prompt name from prompts/ or literal text

    def reply_budget(self, settings: Settings) -> int:
        """The reply's length: the chat's choice, else the setting's, never past the
        longest reply (``ERNIE_MAX_TOKENS``), whoever asks."""
        chosen = self.max_tokens or settings.reply_tokens or settings.max_tokens
        return min(chosen, settings.max_tokens)


def build_sampling_params(
    settings: Settings,
    model: ModelInfo,
    options: ChatOptions = ChatOptions(),
    **extra: object,
) -> SamplingParams:
    """Sampling for a streamed reply: token deltas, the model's stop ids, no special tokens.

    The engine decodes text itself (``engine.decode``), so vLLM only returns token ids.
    ``extra`` passes further SamplingParams fields (warm-up and tests use it).
    """
    chosen = {
        "temperature": options.temperature
        if options.temperature is not None
        else settings.temperature,
        "top_p": options.top_p if options.top_p is not None else settings.top_p,
        "repetition_penalty": settings.repetition_penalty,
    }
    # ignore_eos: the reply runs to max_tokens, past every stop token (as vLLM's server
    # does with ignore_eos, which then leaves generation_config's eos ids out too).
    ignore_eos = bool(extra.pop("ignore_eos", settings.ignore_eos))
    values = {k: v for k, v in model.sampling_defaults.items()}
    values.update({k: v for k, v in chosen.items() if v is not None})
    fields: dict[str, object] = {
        **values,
        "max_tokens": options.reply_budget(settings),
        "stop_token_ids": [] if ignore_eos else list(model.stop_token_ids),
        "ignore_eos": ignore_eos,
        "skip_special_tokens": True,
        "detokenize": False,
        "output_kind": RequestOutputKind.DELTA,
        **extra,
    }
    return SamplingParams(**fields)  # type: ignore[arg-type]
