"""Every Socket.IO event's chain, wired in one place: the front door, then the app's steps
for that event, outermost first, then Chainlit's own handler.

Chainlit registers one handler per event on python-socketio's server. This is the one
module that reads or replaces them: each event, including those no step names, gets
``door(event, steps(chainlit's handler))``, so no event of a socket reaches Chainlit
unguarded (``chat.access.front_door``). Chainlit's own handlers are kept the first time
(``_CHAINLIT``): wiring again (``chainlit run -w`` imports app.py anew) builds from them,
never around an earlier chain. A step named for an event Chainlit does not have (an
upgrade renamed it) stops the start.

Usage::

    wire(door.guard, {"client_message": [admission.message, arrival.message], ...})
    await close_socket(sid)     # the server ends a socket (the door, on a flood)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from chainlit.server import sio

__all__ = ["Handler", "Step", "chainlit_events", "close_socket", "wire"]

Handler = Callable[..., Awaitable[Any]]
Step = Callable[[Handler], Handler]  # a handler around the next one

_CHAINLIT: dict[str, Handler] = {}  # Chainlit's own handlers, by event


def chainlit_events() -> set[str]:
    """The events Chainlit handles."""
    return set(_CHAINLIT) | set(sio.handlers["/"])


def wire(door: Callable[[str, Handler], Handler], steps: Mapping[str, Sequence[Step]]) -> None:
    """Replace each of Chainlit's handlers with its chain (idempotent: built from
    Chainlit's own every time)."""
    handlers = sio.handlers["/"]
    for event, handler in handlers.items():
        _CHAINLIT.setdefault(event, handler)
    unknown = set(steps) - set(_CHAINLIT)
    if unknown:
        raise RuntimeError(f"Chainlit has no socket event {sorted(unknown)}: see chat.events")
    for event, chainlit_handler in _CHAINLIT.items():
        handler = chainlit_handler
        for step in reversed(steps.get(event, ())):
            handler = step(handler)
        handlers[event] = door(event, handler)


async def close_socket(sid: str) -> None:
    """End the socket ``sid`` from the server (its disconnect chain runs)."""
    await sio.disconnect(sid)
