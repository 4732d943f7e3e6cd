"""The demo model's settings for tests and the CI-sized benchmark: small enough for two
engines at once on a 2-core, 24 GiB machine."""

from __future__ import annotations

from typing import Any

from settings.settings import Settings

__all__ = ["APP_ENV", "DEMO_APP_ENV", "ENGINE_SETTINGS", "NO_LIMITS", "hermetic_settings"]

ENGINE_SETTINGS: dict[str, Any] = {
    "kv_cache_gb": 0.5,
    "max_model_len": 2048,
    "max_tokens": 1536,  # the longest reply: the tests' long ones (1,500 tokens) fit
    "reply_tokens": 256,
    "max_num_seqs": 32,
}
# Every test client comes from 127.0.0.1, one address: the per-address limits (tested on
# their own) are lifted for the rest.
NO_LIMITS: dict[str, str] = {
    name: "1000000"
    for name in (
        "ERNIE_USER_MAX_REPLIES",
        "ERNIE_USER_MESSAGES_PER_MINUTE",
        "ERNIE_MAX_CHATS_PER_ADDRESS",
        "ERNIE_NEW_CHATS_PER_MINUTE",
        "ERNIE_REQUESTS_PER_MINUTE",
    )
}
# The same, as an app's environment (warm-up off: a test's first chat is its own).
APP_ENV: dict[str, str] = NO_LIMITS | {
    "ERNIE_KV_CACHE_GB": "0.5",
    "ERNIE_MAX_MODEL_LEN": "2048",
    "ERNIE_MAX_NUM_SEQS": "32",
    "ERNIE_WARMUP": "false",
}
# The session's demo app (scripted model): what the browser tests, the operations
# endpoints and the soak meet.
DEMO_APP_ENV: dict[str, str] = NO_LIMITS | {
    "ERNIE_KV_CACHE_GB": "0.5",
    "ERNIE_MAX_MODEL_LEN": "16384",
    "ERNIE_MAX_TOKENS": "8192",  # the longest reply: the settings slider's end
    "ERNIE_REPLY_TOKENS": "100",  # the panel's tests set 64: a default apart from it
    "ERNIE_STREAM_INTERVAL_MS": "100",  # few frames even when a busy CPU decodes slowly
    "ERNIE_SOCKET_TIMEOUT_S": "6",  # a socket that stopped reading is ended within a test
}


def hermetic_settings(**values: Any) -> Settings:
    """Settings from ``values`` and defaults only (no environment file)."""
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]
