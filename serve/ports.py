"""Local ports for processes that bind them later, picked below the kernel's ephemeral range.

A group's worker binds the port it was given only after it imported Chainlit and vLLM,
and again after each restart of its unit. Meanwhile the kernel may hand the same number to
any outgoing connection as its source port when it comes from the ephemeral range (a busy
test machine's client sockets took one: the server then failed with "address already in
use"). Numbers below that range are never handed out by the kernel, only bound on purpose.

Usage::

    port = free_port(taken={8000})    # binds now, is not in ``taken``
"""

from __future__ import annotations

import random
import socket
from collections.abc import Collection
from pathlib import Path

__all__ = ["free_port"]

RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10_000  # below: well-known services' ports
TRIES = 200


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux's default: 32768)."""
    try:
        return int(RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _binds(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(taken: Collection[int] = ()) -> int:
    """A port of 127.0.0.1 that binds now and is not in ``taken``: below the ephemeral
    range when there is one, else one the kernel picks."""
    low = _ephemeral_low()
    for _ in range(TRIES if low > LOWEST else 0):
        port = random.randrange(LOWEST, low)
        if port not in taken and _binds(port):
            return port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
