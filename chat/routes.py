"""The operations endpoints on Chainlit's server: ``/healthz``, ``/readyz``, ``/metrics``.

Thin routes over the engine's status and the metrics registry (vLLM's and the app's,
``chat.metrics``). ``/metrics`` and the detail of ``/readyz`` (model path, settings,
capacity) are for the operator: with ``ERNIE_OPS_TOKEN`` set they need
``Authorization: Bearer <token>``; without it they answer only the machine itself (a
visitor from a loopback address, as ``chat.access.peers`` knows visitors: through a
proxy, the one the proxy names). ``/readyz``'s status code and state, and ``/healthz``,
stay open for load balancers.
"""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from engine import ChatClient, EngineState

from . import metrics
from .access.peers import ProxyTrust, is_loopback
from .chainlit_door import add_routes_first, sessions_held

__all__ = ["register"]

PATHS = ("/healthz", "/readyz", "/metrics")


async def healthz() -> JSONResponse:
    """200 while the process serves (even while the model loads)."""
    return JSONResponse({"status": "alive"})


def readiness(engine: ChatClient) -> tuple[int, dict[str, Any]]:
    """200 with the capacity report once the engine is ready; else 503, state and time."""
    status = engine.status()
    body: dict[str, Any] = {"state": status.state.value, "elapsed_s": round(status.elapsed_s, 1)}
    if status.state is not EngineState.READY:
        return 503, body | {"reason": status.reason}
    group = metrics.group_replying()  # a group of workers: the replies of all of them
    running = engine.running_requests if group is None else group
    body.update(running_requests=running, capacity=engine.capacity.as_dict())
    return 200, body


def _authorized(request: Request, token: bytes | None, trust: ProxyTrust) -> bool:
    """The request carries the token (compared in constant time); no token set: it comes
    from the machine itself."""
    if token is None:
        return is_loopback(trust.address(request.scope))
    given = request.headers.get("authorization", "").removeprefix("Bearer ").encode()
    return hmac.compare_digest(given, token)


def register(engine: ChatClient, token: bytes | None, trust: ProxyTrust) -> None:
    """Add the routes ahead of Chainlit's catch-all page route (which shadows routes
    added after it); idempotent."""

    async def readyz(request: Request) -> JSONResponse:
        """The engine's readiness (``readiness``); the detail only with the token."""
        code, body = readiness(engine)
        if not _authorized(request, token, trust):
            body = {"state": body["state"]}
        return JSONResponse(body, status_code=code)

    async def prometheus_metrics(request: Request) -> Response:
        """vLLM's engine metrics and the app's, in Prometheus' text format."""
        if not _authorized(request, token, trust):
            return JSONResponse({"detail": "a bearer token is needed"}, status_code=401)
        metrics.SESSIONS_HELD.set(sessions_held())
        return Response(metrics.exposition(), media_type=metrics.CONTENT_TYPE)

    endpoints = (healthz, readyz, prometheus_metrics)
    add_routes_first(dict(zip(PATHS, endpoints, strict=True)))
