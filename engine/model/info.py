"""What the engine needs to know about the model besides its weights.

The tokenizer (for prompts, token counts and decoding), the token ids that end a reply,
and the sampling defaults from the model's ``generation_config.json``. All of it is
looked up from the model's own files, never hard-coded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.model.demo import DEMO_MARKER
from settings.settings import Settings

__all__ = ["END_OF_TURN_TOKENS", "ModelInfo", "load_model_info", "stop_token_ids"]

# Tokens that end an assistant turn in the chat templates we know (ERNIE-4.5's sep token).
END_OF_TURN_TOKENS = ("<|end_of_sentence|>",)


@dataclass(frozen=True)
class ModelInfo:
    """The model's tokenizer, reply stop ids and sampling defaults."""

    tokenizer: Any
    stop_token_ids: list[int]
    sampling_defaults: dict[str, float] = field(default_factory=dict)
    is_demo: bool = False


def stop_token_ids(tokenizer: Any, generation_eos: int | list[int] | None) -> list[int]:
    """The eos token, the end-of-turn tokens the tokenizer defines, and generation_config's eos."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    vocab = tokenizer.get_vocab()
    ids.update(vocab[token] for token in END_OF_TURN_TOKENS if token in vocab)
    if isinstance(generation_eos, int):
        ids.add(generation_eos)
    elif generation_eos:
        ids.update(generation_eos)
    return sorted(ids)


def _generation_config(settings: Settings) -> Any:
    from transformers import GenerationConfig

    try:
        return GenerationConfig.from_pretrained(
            settings.model, revision=settings.revision or "main"
        )
    except OSError:  # the model ships none: vLLM's defaults apply
        return None


def load_model_info(settings: Settings) -> ModelInfo:
    """Load the tokenizer and generation config (blocking: call it from a thread)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(
        settings.tokenizer or settings.model, revision=settings.revision
    )
    gen = _generation_config(settings)
    defaults = {}
    if gen is not None:
        for name in ("temperature", "top_p", "repetition_penalty"):
            if getattr(gen, name, None) is not None:
                defaults[name] = float(getattr(gen, name))
    return ModelInfo(
        tokenizer=tokenizer,
        stop_token_ids=stop_token_ids(tokenizer, None if gen is None else gen.eos_token_id),
        sampling_defaults=defaults,
        is_demo=(Path(settings.model) / DEMO_MARKER).is_file(),
    )
