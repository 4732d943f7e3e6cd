"""The model's own files, read before anything loads: config.json and the tokenizer's.

Usage::

    config = read_model_config(settings)    # a local folder, or the hub (or its cache)
    shape = ModelShape.from_config(config)  # what the checks and the sizing need

A local folder is checked for what loading needs; a hub id is asked for its config.json
(cached first, hub retry warnings kept out of the operator's way); every failure is one
line naming the setting to change.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from engine.model.memory import kv_bytes_per_token
from settings.settings import Settings, SettingsError, env_name

__all__ = ["ModelShape", "hub_answers", "hub_unreachable", "read_model_config", "refuse"]

logger = logging.getLogger(__name__)

HUB_CONNECT_S = 5.0  # how long the hub's host may take to take a connection
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")


def hub_unreachable(settings: Settings) -> str:
    """Why a model named by the hub cannot be had, and the settings that fix it."""
    return (
        f"{env_name('model')}={settings.model!r}: not a local folder, and the hub cannot be "
        f"reached; set {env_name('model')} to a local folder with the model, or HF_ENDPOINT "
        "to a hub mirror, or VLLM_USE_MODELSCOPE=true for ModelScope"
    )


@dataclass(frozen=True)
class ModelShape:
    """What the checks need from the model's config.json."""

    max_position_embeddings: int | None
    num_attention_heads: int
    num_key_value_heads: int
    num_hidden_layers: int
    head_dim: int
    dtype: str  # the checkpoint's own dtype
    parameters: int | None = None  # a dense decoder's count from its config; None: unknown

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
            parameters=dense_parameters(text),
        )

    def kv_bytes_per_token(self, dtype: str, tensor_parallel_size: int = 1) -> int:
        """KV cache bytes one token takes on one device (keys and values, every layer)."""
        return kv_bytes_per_token(
            layers=self.num_hidden_layers,
            kv_heads=self.num_key_value_heads,
            head_dim=self.head_dim,
            dtype=dtype,
            tensor_parallel_size=tensor_parallel_size,
        )


def dense_parameters(text: dict[str, Any]) -> int | None:
    """A dense decoder's parameters from its config (attention, gated MLP, embeddings;
    norms and biases left out: under 1%); None for a mixture of experts or a config
    without the sizes (the count would mislead)."""
    if any("expert" in key for key in text):
        return None
    try:
        hidden, layers = int(text["hidden_size"]), int(text["num_hidden_layers"])
        inner, vocab = int(text["intermediate_size"]), int(text["vocab_size"])
        heads = int(text["num_attention_heads"])
    except (KeyError, TypeError, ValueError):
        return None
    head_dim = int(text.get("head_dim") or hidden // heads)
    kv_heads = int(text.get("num_key_value_heads") or heads)
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    embeddings = vocab * hidden * (1 if text.get("tie_word_embeddings", False) else 2)
    return layers * (attention + 3 * hidden * inner) + embeddings


def refuse(field: str, value: Any, why: str, fix: str) -> SettingsError:
    """The one-line error for a setting: ``ERNIE_X=value: why; fix``."""
    return SettingsError(f"{env_name(field)}={value!r}: {why}; {fix}")


# --- the model's files ----------------------------------------------------------------
def _is_local(value: str) -> bool:
    return Path(value).expanduser().exists() or value.startswith(("/", ".", "~"))


def _local_config(value: str) -> dict[str, Any]:
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise refuse("model", value, "no such folder", "give the folder of the model, or a hub id")
    config = folder / "config.json"
    if not config.is_file():
        raise refuse(
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
        raise refuse(
            field,
            source,
            "no tokenizer files (tokenizer.json or tokenizer.model) in this folder",
            "copy them from the model's release, or set ERNIE_TOKENIZER to a folder or hub "
            "id that has them",
        )


def hub_answers(timeout_s: float = HUB_CONNECT_S) -> bool:
    """Whether the hub's host (``HF_ENDPOINT``) takes a connection, tried once; through a
    proxy (``HTTPS_PROXY``, ``ALL_PROXY``) the hub client's own tries decide."""
    from huggingface_hub import constants

    if any(os.environ.get(name) for name in PROXY_VARIABLES):
        return True
    parts = urlsplit(constants.ENDPOINT)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=timeout_s):
            return True
    except OSError:  # no such name, refused, timed out
        return False


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
    if not hub_answers():  # one try, not the hub client's retries (24-38 s to say so)
        raise LocalEntryNotFoundError("the hub does not answer")
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
        raise refuse(
            "revision", settings.revision, "no such revision of the model", "unset it for main"
        ) from None
    except EntryNotFoundError:
        raise refuse(
            "model", settings.model, "the repository has no config.json", "give a model repository"
        ) from None
    except RepositoryNotFoundError:
        raise refuse(
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
