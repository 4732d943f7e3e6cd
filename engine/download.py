"""The model's files from the hub, fetched before vLLM starts, with the progress shown.

vLLM downloads a hub model inside its engine process, where nobody sees the progress: a
first start said only "Loading the model… N s" for minutes. Here the files vLLM loads are
fetched first into the same hub cache (``HF_HOME``; a mirror through ``HF_ENDPOINT``) with
huggingface_hub's own client, whose byte counts reach ``Download``; vLLM then finds them
in the cache. A download that stops keeps the files fetched whole; the next start fetches
the rest (huggingface_hub 2.4 starts a partly fetched file over: each process downloads to
a temporary file of its own).

Usage::

    download = Download()
    await asyncio.to_thread(fetch_model, settings, download)   # download.done_bytes, ...
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from huggingface_hub import constants, snapshot_download
from huggingface_hub.utils.tqdm import tqdm as hub_tqdm

from settings.settings import Settings

__all__ = ["Download", "DownloadError", "fetch_model"]

logger = logging.getLogger(__name__)

# What vLLM reads of a hub model: config, weights, tokenizer, chat template.
FILES = ["*.json", "*.safetensors", "*.model", "*.jinja", "*.txt", "*.tiktoken"]
LOG_EVERY_S = 10.0


class DownloadError(RuntimeError):
    """A download that stopped: the cause and what to change, in one line."""


@dataclass
class Download:
    """Bytes fetched so far of the files being fetched (updated from the download's threads)."""

    done_bytes: int = 0
    total_bytes: int = 0
    started_at: float = field(default_factory=time.monotonic)
    active: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _logged_at: float = 0.0

    @property
    def rate(self) -> float:
        """Bytes a second since the download began."""
        return self.done_bytes / max(time.monotonic() - self.started_at, 1e-3)

    def add(self, done: int = 0, total: int = 0) -> None:
        with self._lock:
            self.done_bytes += done
            self.total_bytes += total
        now = time.monotonic()
        if now - self._logged_at >= LOG_EVERY_S:
            self._logged_at = now
            logger.info("%s", self.describe())

    @property
    def size_bytes(self) -> int:
        """The files' size as far as known, never less than what was fetched:
        huggingface_hub adds each file's size to its aggregated bar from its download
        threads without a lock, and under load an addition was lost ("24.8 of 0.4 MB")."""
        return max(self.total_bytes, self.done_bytes)

    def describe(self) -> str:
        mb = 1_000_000
        return (
            f"downloading the model: {self.done_bytes / mb:,.1f} of "
            f"{self.size_bytes / mb:,.1f} MB, {self.rate / mb:,.1f} MB/s"
        )


def _progress_class(download: Download) -> type[hub_tqdm]:
    """A progress bar class for huggingface_hub that counts bytes into ``download``."""

    class Counted(hub_tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._bytes = kwargs.get("unit") == "B" and "Reconstruct" in str(kwargs.get("desc"))
            kwargs["disable"] = True  # no bar on the console: the app reports the bytes
            super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]

        def __setattr__(self, name: str, value: Any) -> None:
            if name == "total" and getattr(self, "_bytes", False) and value:
                download.add(total=int(value) - int(getattr(self, "total", 0) or 0))
            super().__setattr__(name, value)

        def update(self, n: float | None = 1) -> bool | None:
            if self._bytes and n:
                download.add(done=int(n))
            return super().update(n)  # type: ignore[no-any-return]

    return Counted


def fetch_model(settings: Settings, download: Download) -> None:
    """Fetch the hub model's files into the hub cache (a local folder: nothing to do)."""
    model = settings.model
    if Path(model).expanduser().exists() or os.environ.get("VLLM_USE_MODELSCOPE"):
        return
    download.active, download.started_at = True, time.monotonic()  # the rate from here
    try:
        snapshot_download(
            model,
            revision=settings.revision,
            allow_patterns=FILES,
            tqdm_class=_progress_class(download),
        )
    except Exception as exc:
        raise DownloadError(_stopped(model, exc)) from exc
    finally:
        download.active = False
    if download.total_bytes:  # all in the cache already: nothing to report
        logger.info("downloaded the model: %s", download.describe().split(": ", 1)[1])


def _stopped(model: str, exc: Exception) -> str:
    cause = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return (
        f"downloading {model} from {constants.ENDPOINT} stopped ({cause}); check the "
        "network, or set HF_ENDPOINT to a mirror (https://hf-mirror.com) or ERNIE_MODEL to a "
        "local folder; a restart fetches what is missing"
    )
