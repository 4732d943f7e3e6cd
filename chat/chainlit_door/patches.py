"""Two defects of Chainlit that hurt an app with an engine in its process.

* Chainlit's package ``__getattr__`` raises ``KeyError`` for unknown names where Python
  requires ``AttributeError`` (Chainlit#2499). PyTorch's inductor probes modules with
  ``hasattr`` while compiling, so vLLM's engine core dies with ``KeyError: 'torch'`` when
  Chainlit is imported. ``guard_module_getattr(chainlit)`` before the engine starts fixes
  it; the engine core is forked on GPUs (``engine.engine_args``) so it inherits it.
* Every ``Message`` and ``Step`` Chainlit builds first calls ``time.sleep(0.001)``, which
  blocks the event loop: four per chat message, so a burst of 64 messages waits ~0.26 s
  for nothing, and every reply streaming meanwhile stalls with it (Chainlit#1374, never
  merged). ``drop_blocking_sleep("chainlit.message", "chainlit.step")`` gives those modules
  a ``time`` without the sleep; their timestamps keep the clock's microseconds.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["drop_blocking_sleep", "guard_module_getattr"]

_GETATTR: dict[str, Callable[[str], Any]] = {}  # each module's own __getattr__, kept first


def guard_module_getattr(module: ModuleType) -> None:
    """Wrap ``module.__getattr__`` so a lookup miss raises AttributeError; idempotent."""
    current = getattr(module, "__getattr__", None)
    if current is None:
        return
    original = _GETATTR.setdefault(module.__name__, current)

    def __getattr__(name: str) -> Any:
        try:
            return original(name)
        except KeyError as exc:
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") from exc

    module.__getattr__ = __getattr__  # type: ignore[method-assign]


class _TimeWithoutSleep(ModuleType):
    """The ``time`` module, except that ``sleep`` returns at once."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        """Nothing: a blocking sleep on the event loop stalls every chat."""


_TIME_WITHOUT_SLEEP = _TimeWithoutSleep("time")


def drop_blocking_sleep(*module_names: str) -> None:
    """Give each named module that imported ``time`` a ``time`` whose ``sleep`` does nothing.

    Names, not modules: ``chainlit.step`` the attribute is Chainlit's decorator, and only
    the import system gives the module of that name.
    """
    for name in module_names:
        module = importlib.import_module(name)
        if getattr(module, "time", None) is time:
            module.time = _TIME_WITHOUT_SLEEP  # type: ignore[attr-defined]
