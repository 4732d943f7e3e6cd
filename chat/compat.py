"""Work around Chainlit defects that hurt an app with an engine in its process.

* Chainlit's package ``__getattr__`` raises ``KeyError`` for unknown names where Python
  requires ``AttributeError`` (Chainlit#2499). PyTorch's inductor probes modules with
  ``hasattr`` while compiling, so vLLM's engine core dies with ``KeyError: 'torch'`` when
  Chainlit is imported. ``guard_module_getattr(chainlit)`` before the engine starts fixes
  it; the engine core is forked on GPUs (see ``engine_args``) so it inherits the fix.
* Every ``Message`` and ``Step`` Chainlit builds first calls ``time.sleep(0.001)``, which
  blocks the event loop: four per chat message (the user's message, the ``on_message``
  step, the thinking indicator, the reply), so a burst of 64 messages waits ~0.26 s
  for nothing, and every reply streaming meanwhile stalls with it (Chainlit#1374, never
  merged). ``drop_blocking_sleep("chainlit.message", "chainlit.step")`` gives those modules a
  ``time`` without the sleep; their timestamps keep the clock's microseconds, so steps
  built one after another still sort in order.
* Chainlit keeps uploads in ``.files`` beside the app's code and removes that folder at
  exit, so the code's folder had to be writable by the app (the image's ``/app``: a
  planted ``uvloop.py`` there would be imported). The app takes no uploads:
  ``private_files_folder()`` points Chainlit at a folder of this process's own instead.
* Chainlit's ``@cl.on_message`` runs each message's handler inside a ``Step`` named
  ``on_message``: two websocket packets (its start and its end) and, with the history on,
  two database writes that store the message's text once more as the step's input, for
  every message, while the chat shows no such step. ``answer_messages(handler)`` hands
  Chainlit the handler as it calls one, without the step.
* Chainlit keeps every message of a chat in its context for the session's life.
  ``trim_chat_context(keep)`` drops the oldest past ``keep`` (the model's history is the
  app's own record, ``chat.conversation``; the context only serves edits of recent ones).
* Chainlit counts no sessions: ``sessions_held()`` says how many it keeps in memory.
"""

from __future__ import annotations

import importlib
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import chainlit.config
import chainlit.server
from chainlit.chat_context import chat_contexts
from chainlit.config import config
from chainlit.context import context
from chainlit.session import ws_sessions_id
from chainlit.utils import wrap_user_function

__all__ = [
    "answer_messages",
    "drop_blocking_sleep",
    "guard_module_getattr",
    "private_files_folder",
    "sessions_held",
    "trim_chat_context",
]


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


def private_files_folder() -> Path:
    """Chainlit's files folder moved to a new private one (idempotent); the folder."""
    current = Path(chainlit.server.FILES_DIRECTORY)  # type: ignore[attr-defined]
    if current.name.startswith("ernie-chainlit-files-"):
        return current
    folder = Path(tempfile.mkdtemp(prefix="ernie-chainlit-files-"))
    chainlit.config.FILES_DIRECTORY = folder  # read by sessions when they start
    chainlit.server.FILES_DIRECTORY = folder  # type: ignore[attr-defined]  # removed at exit
    return folder


def trim_chat_context(keep: int) -> None:
    """Keep only this chat's last ``keep`` messages in Chainlit's context."""
    messages = chat_contexts.get(context.session.id)
    if messages is not None and len(messages) > keep:
        del messages[:-keep]


def answer_messages(handler: Callable[[Any], Awaitable[None]]) -> None:
    """Chainlit's message handler: ``handler``, with no step around it."""
    config.code.on_message = wrap_user_function(handler)


def sessions_held() -> int:
    """The chat sessions Chainlit keeps in this process: open, or closed and kept."""
    return len(ws_sessions_id)
