"""Make lazy modules safe for PyTorch's compiler.

Chainlit's package ``__getattr__`` raises ``KeyError`` for unknown names where Python
requires ``AttributeError`` (Chainlit#2499). PyTorch's inductor probes modules with
``hasattr`` while compiling, so vLLM's engine core dies with ``KeyError: 'torch'`` when
Chainlit is imported. ``guard_module_getattr(chainlit)`` before the engine starts fixes
it; the engine core is forked on GPUs (see ``engine_args``) so it inherits the fix.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

__all__ = ["guard_module_getattr"]


def guard_module_getattr(module: ModuleType) -> None:
    """Wrap ``module.__getattr__`` so a lookup miss raises AttributeError; idempotent."""
    original = getattr(module, "__getattr__", None)
    if original is None or getattr(original, "_raises_attribute_error", False):
        return

    def __getattr__(name: str) -> Any:
        try:
            return original(name)
        except KeyError as exc:
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") from exc

    __getattr__._raises_attribute_error = True  # type: ignore[attr-defined]
    module.__getattr__ = __getattr__  # type: ignore[method-assign]
