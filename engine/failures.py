"""One line that tells an operator why the engine did not start, and what to do."""

from __future__ import annotations

from .settings import Settings, env_name

__all__ = ["describe_failure"]

MAX_LINE = 300
_HUB_SIGNS = (
    "couldn't connect",
    "connection",
    "offline",
    "not a valid model identifier",
    "can't load tokenizer",
    "localentrynotfound",
    "repository not found",
)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:MAX_LINE]


def _is_hub_failure(exc: BaseException) -> bool:
    for item in _chain(exc):
        kind = type(item).__module__ + type(item).__name__
        text = (kind + " " + str(item)).lower()
        if "huggingface_hub" in kind or any(sign in text for sign in _HUB_SIGNS):
            return True
    return False


def describe_failure(exc: BaseException, settings: Settings) -> str:
    """The reason, in one line; model-download failures get the ways around them."""
    if _is_hub_failure(exc):
        return (
            f"cannot load the model {settings.model!r} (not a local folder, and the hub "
            f"cannot be reached): set {env_name('model')} to a local folder with the model, "
            "or HF_ENDPOINT to a hub mirror, or VLLM_USE_MODELSCOPE=true for ModelScope"
        )
    return _first_line(exc)
