"""The one process's door for connections, as HAProxy is a group's: how many one address
may hold open, and how long a request's headers may take.

uvicorn keeps a connection that sends nothing, or sends its headers a byte at a time, for
ever (its keep-alive timeout starts only after a response), and takes any number from one
address: 1,200 idle and slow-header connections from one address were never closed, and
at ~20,500 other visitors' connections were reset. Here:

* a connection must send a request's headers within ``ERNIE_REQUEST_TIMEOUT_S`` of opening
  (or of the first byte of its next request: between requests uvicorn's keep-alive
  timeout, set to the same, runs), else it is closed;
* one address holds at most ``ERNIE_MAX_CONNECTIONS_PER_ADDRESS`` connections, websockets
  included; the next is closed at once. (A group's workers count no addresses: every
  connection comes from HAProxy, which keeps the cap.)

uvicorn is given this protocol by ``serve.web``; ``chainlit run app.py``, whose server
Chainlit configures itself, gets it as uvicorn's ``auto`` protocol (``limit_connections``).

Usage::

    gate = ConnectionGate(most_per_address=256, header_timeout_s=10)
    uvicorn.run(app, http=gated_protocol(gate), timeout_keep_alive=10)
"""

from __future__ import annotations

import asyncio
import logging
import math

import uvicorn.config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from chat.access.rates import LogThrottle
from settings.settings import Settings

__all__ = ["ConnectionGate", "gated_protocol", "limit_connections"]

logger = logging.getLogger(__name__)

SWEEP_EVERY = 1024  # connections between two sweeps of the addresses that left


class ConnectionGate:
    """The connections each address holds (as their transports), and the rules above."""

    def __init__(self, *, most_per_address: int | None, header_timeout_s: float) -> None:
        self.most_per_address = most_per_address
        self.header_timeout_s = header_timeout_s
        self._held: dict[str, set[asyncio.BaseTransport]] = {}
        self._seen = 0
        self._warnings = LogThrottle(per_minute=6)  # a flood is said, not written 1,000 times

    def admit(self, address: str, transport: asyncio.BaseTransport) -> bool:
        """Count ``transport`` for ``address``; False (not counted) past the cap."""
        if self.most_per_address is None:
            return True
        self._seen += 1
        if self._seen % SWEEP_EVERY == 0:
            self._sweep()
        held = self._held.setdefault(address, set())
        held -= {t for t in held if t.is_closing()}
        if len(held) >= self.most_per_address:
            if self._warnings.allow(address):
                logger.warning("connection refused: %s holds %d", address, self.most_per_address)
            return False
        held.add(transport)
        return True

    def _sweep(self) -> None:
        for address in list(self._held):
            self._held[address] = {t for t in self._held[address] if not t.is_closing()}
            if not self._held[address]:
                del self._held[address]


def gated_protocol(gate: ConnectionGate) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with ``gate``'s rules."""

    class GatedHttpToolsProtocol(HttpToolsProtocol):
        _headers_due: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            address = self.client[0] if self.client else ""
            if not gate.admit(address, transport):
                logger.warning(
                    "connection refused: %s holds %s already", address, gate.most_per_address
                )
                transport.close()
                return
            self._expect_headers()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._headers_due is None:  # the next request on a kept-alive connection
                self._expect_headers()

        def on_headers_complete(self) -> None:
            self._cancel_headers_due()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_headers_due()
            super().connection_lost(exc)

        def _expect_headers(self) -> None:
            self._headers_due = self.loop.call_later(gate.header_timeout_s, self._too_slow)

        def _cancel_headers_due(self) -> None:
            if self._headers_due is not None:
                self._headers_due.cancel()
                self._headers_due = None

        def _too_slow(self) -> None:
            self._headers_due = None
            if not self.transport.is_closing():
                self.transport.close()

    return GatedHttpToolsProtocol


def gate_of(settings: Settings, *, counts_addresses: bool) -> ConnectionGate:
    most = settings.max_connections_per_address if counts_addresses else None
    return ConnectionGate(most_per_address=most, header_timeout_s=settings.request_timeout_s)


def keep_alive_s(settings: Settings) -> int:
    """uvicorn's keep-alive timeout (whole seconds): an idle kept-alive connection's end."""
    return max(1, math.ceil(settings.request_timeout_s))


def limit_connections(settings: Settings) -> None:
    """``chainlit run app.py``: the gate as uvicorn's ``auto`` protocol (Chainlit builds
    the server after it imported app.py)."""
    uvicorn.config.HTTP_PROTOCOLS["auto"] = gated_protocol(gate_of(settings, counts_addresses=True))  # type: ignore[assignment]
