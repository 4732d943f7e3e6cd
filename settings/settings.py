"""Settings: every knob of the app, read from ``ERNIE_*`` environment variables or ``.env``.

Usage::

    settings = load_settings()          # settings.loader; SettingsError: one line
    settings.model, settings.max_tokens
    settings.origins["max_model_len"]   # "environment", ".env", "profile balanced", ...

A value left unset means "the model's or vLLM's own default" (``None`` here); the
engine resolves it when it loads. ``ERNIE_PROFILE`` presets the values that size a
deployment (``settings.profiles``); any explicit ``ERNIE_*`` value wins over its profile.
Checks against the model and the hardware belong to ``engine.plan.preflight``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from settings.names import ENV_PREFIX, SettingsError, env_name
from settings.profiles import DEFAULT_PROFILE, PROFILE_FIELDS, PROFILES, ProfileName
from settings.visitors import AUTH_SECRET, AccessSettings

__all__ = ["AUTH_SECRET", "ENV_FILE", "ENV_PREFIX", "Settings", "SettingsError", "env_name"]

ENV_FILE = ".env"

Dtype = Literal["auto", "bfloat16", "float16", "float32"]


class Settings(AccessSettings):
    """The app's settings. Field ``x`` is read from ``ERNIE_X``."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_file=ENV_FILE,
        env_file_encoding="utf-8",
        extra="ignore",  # unknown ERNIE_* names: settings.loader refuses them
        frozen=True,
        protected_namespaces=(),
    )

    # --- model -------------------------------------------------------------------
    model: str = Field(
        "baidu/ERNIE-4.5-0.3B-PT",
        min_length=1,
        description="Hub id or local folder of the model.",
    )
    tokenizer: str | None = Field(
        None, description="Hub id or folder of the tokenizer; unset: the model's."
    )
    revision: str | None = Field(
        None, description="Hub revision (branch, tag or commit) of the model."
    )
    dtype: Dtype = Field("auto", description="Weights dtype; auto: the model's own.")
    load_format: Literal["auto", "dummy"] = Field(
        "auto", description="dummy: random weights of the model's shape (benchmarks only)."
    )

    # --- engine ------------------------------------------------------------------
    engine: Literal["local", "remote"] = Field(
        "local",
        description="local: vLLM in this process; remote: the vLLM servers at REMOTE_URL.",
    )
    remote_url: str | None = Field(
        None,
        description="Base URLs of OpenAI-compatible vLLM servers, comma-separated "
        "(ERNIE_ENGINE=remote), e.g. http://gpu-1:8000,http://gpu-2:8000.",
    )
    remote_api_key: SecretStr | None = Field(
        None,
        description="The API key the vLLM servers were started with (vllm serve --api-key); "
        "sent as a bearer token. Use https:// URLs for TLS.",
    )
    remote_wait_s: float = Field(
        600,
        ge=0,
        le=86400,
        description="How long the app waits at start for a remote server that does not "
        "answer yet (vllm serve opens its port once its model is loaded), asking every 2 s, "
        "before it gives up; 0: not at all.",
    )
    workers: int | None = Field(
        None,
        ge=1,
        le=64,
        description="Web front-end processes per engine core, behind one port (HAProxy); "
        "unset: 1 on the CPU, on a GPU one per 4 CPU cores over the cores, 2 to 4.",
    )
    engines: int | None = Field(
        None,
        ge=1,
        le=16,
        description="Engine cores on the machine's GPUs, each with its share of the memory "
        "and its own workers, behind the same port; unset: up to 4 a GPU for a model whose "
        "weights take at most 2% of its memory, with 4 CPU cores a core; else 1 "
        "(docs/scaling.md).",
    )
    profile: ProfileName = Field(
        DEFAULT_PROFILE,
        description="Presets of max_model_len, the batch (a factor of the device's) and "
        "GPU memory share.",
    )
    max_model_len: int = Field(
        PROFILES[DEFAULT_PROFILE].max_model_len,
        ge=64,
        description="Longest prompt plus reply in tokens; unset: the profile's.",
    )
    tensor_parallel_size: int = Field(1, ge=1, le=64, description="GPUs per model copy.")
    pipeline_parallel_size: int = Field(1, ge=1, le=64, description="Pipeline stages.")
    gpu_memory_utilization: float | None = Field(
        None,
        gt=0,
        le=1,
        description=(
            "Share of GPU memory vLLM may take (on the CPU backend: share of RAM); "
            "unset: the profile's on a GPU, 0.30 on the CPU."
        ),
    )
    block_size: int | None = Field(
        None, ge=1, le=1024, description="KV cache block size; unset: the backend's."
    )
    enable_prefix_caching: bool | None = Field(
        None, description="Reuse the KV cache of shared prompt prefixes; unset: vLLM's."
    )
    max_num_seqs: int | None = Field(
        None,
        ge=1,
        le=16384,
        description="Most requests each engine core runs at once; unset: vLLM's batch for "
        "the device times the profile's factor, within what the KV cache holds "
        "(docs/scaling.md).",
    )
    max_num_batched_tokens: int | None = Field(
        None,
        ge=16,
        le=1 << 20,
        description="Most tokens each engine core takes in one step; unset: vLLM's for the "
        "device (twice that with the high-concurrency profile).",
    )
    enforce_eager: bool | None = Field(
        None,
        description="Skip compilation and CUDA graphs; unset: off on a GPU, on on the CPU.",
    )
    stream_interval: int | None = Field(
        None,
        ge=1,
        le=64,
        description="Tokens a reply gathers in the engine before the web app takes them; "
        "unset: 1 on the CPU, 4 on a GPU (docs/scaling.md).",
    )
    cuda_graph_max: int | None = Field(
        None, ge=1, description="Largest batch run as a CUDA graph; unset: max_num_seqs."
    )
    kv_cache_gb: float | None = Field(
        None,
        gt=0,
        description="KV cache size in GiB (mainly for the CPU backend); unset: from memory share.",
    )
    warmup: bool = Field(
        True, description="Run the batch sizes a chat sees before reporting ready."
    )

    restart_tries: int = Field(
        3,
        ge=0,
        le=100,
        description="Tries to build a new engine after it died; all failed: the process exits.",
    )

    # --- console -----------------------------------------------------------------
    log_level: Literal["info", "debug"] = Field(
        "info",
        description="info: the app's lines and every warning on the console; "
        "debug: vLLM's and Chainlit's progress too. The log file gets everything.",
    )
    log_format: Literal["text", "json"] = Field(
        "text", description="json: one JSON object a line, for log collectors."
    )
    log_file: Path = Field(
        Path("logs/ernie-chat.log"), description="Every line of every logger (the console's too)."
    )

    # --- replies -----------------------------------------------------------------
    temperature: float | None = Field(
        None, ge=0, le=2, description="Sampling temperature; unset: the model's default."
    )
    top_p: float | None = Field(
        None, gt=0, le=1, description="Nucleus sampling share; unset: the model's default."
    )
    max_tokens: int = Field(
        1024,
        ge=1,
        description="Longest reply in tokens: no reply runs longer, and the settings panel "
        "offers up to it.",
    )
    reply_tokens: int | None = Field(
        None,
        ge=1,
        description="A reply's length when the chat's settings panel chose none (at most "
        "MAX_TOKENS); unset: MAX_TOKENS.",
    )
    repetition_penalty: float | None = Field(
        None, gt=0, le=2, description="Repetition penalty; unset: the model's default."
    )
    ignore_eos: bool = Field(
        False, description="Replies always run to max_tokens (benchmarks only)."
    )
    system_prompt: str = Field(
        "zh",
        description="Name of a file in prompts/ (without .md), or literal text; empty: none.",
    )
    max_message_chars: int = Field(
        20_000, ge=1, description="Longest chat message in characters; longer ones are refused."
    )
    max_message_tokens: int | None = Field(
        None,
        ge=1,
        description="Longest chat message in tokens; unset: what fits beside the reply.",
    )
    stream_interval_ms: int = Field(
        50,
        ge=0,
        le=5000,
        description="How long the stream gathers text before a flush; 0: every delta.",
    )

    def default_origin(self, name: str) -> str:
        """The origin of a field no source gave: its profile's, or the default."""
        if name in PROFILE_FIELDS and getattr(self, name) is not None:
            return f"profile {self.profile}"
        return "default"

    @model_validator(mode="before")
    @classmethod
    def _apply_profile(cls, data: Any) -> Any:
        """Fill what the profile presets and was not given explicitly."""
        if not isinstance(data, dict):
            return data
        profile = PROFILES.get(str(data.get("profile", DEFAULT_PROFILE)))
        if profile is None:  # the field's own check reports the bad name
            return data
        return {"max_model_len": profile.max_model_len} | data

    @field_validator("remote_url")
    @classmethod
    def _server_urls(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        urls = [url.strip().rstrip("/") for url in value.split(",") if url.strip()]
        for url in urls:
            parsed = urlsplit(url)
            if "@" in parsed.netloc:
                # The URL would reach logs, errors and /readyz: the key has a field of its own.
                raise ValueError(
                    f"a server URL may not carry a user name or password: drop them and set "
                    f"{env_name('remote_api_key')} to the key vllm serve was started with "
                    f"(--api-key)"
                )
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise ValueError(f"{url!r} is not an http(s) URL such as http://gpu-1:8000")
        return ",".join(urls)

    @property
    def remote_urls(self) -> list[str]:
        return self.remote_url.split(",") if self.remote_url else []

    @model_validator(mode="after")
    def _remote_has_servers(self) -> Settings:
        if self.engine == "remote" and not self.remote_url:
            raise ValueError(
                f"{env_name('engine')}=remote needs {env_name('remote_url')}: the base URL of "
                f"one or more vLLM servers (vllm serve), e.g. http://gpu-1:8000"
            )
        return self

    @model_validator(mode="after")
    def _reply_fits(self) -> Settings:
        if self.reply_tokens is not None and self.reply_tokens > self.max_tokens:
            raise ValueError(
                f"{env_name('reply_tokens')}={self.reply_tokens} is longer than the longest "
                f"reply, {env_name('max_tokens')}={self.max_tokens}: lower it or raise the other"
            )
        if self.max_tokens >= self.max_model_len:
            raise ValueError(
                f"{env_name('max_tokens')}={self.max_tokens} leaves no room for the prompt "
                f"in {env_name('max_model_len')}={self.max_model_len}: lower it "
                f"(for example to {self.max_model_len // 4}) or raise the other"
            )
        return self
