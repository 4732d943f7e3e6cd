"""The operations endpoints on Chainlit's server: ``/healthz``, ``/readyz``, ``/metrics``.

Thin routes over the engine's status and the metrics registry (vLLM's and the app's,
``chat.metrics``).
"""

from __future__ import annotations

from typing import Any

from chainlit.server import app as server
from fastapi.responses import JSONResponse, Response

from engine import ChatEngine, EngineState

from . import metrics

__all__ = ["register"]

PATHS = ("/healthz", "/readyz", "/metrics")


async def healthz() -> JSONResponse:
    """200 while the process serves (even while the model loads)."""
    return JSONResponse({"status": "alive"})


def readiness(engine: ChatEngine) -> tuple[int, dict[str, Any]]:
    """200 with the capacity report once the engine is ready; else 503, state and time."""
    status = engine.status()
    body: dict[str, Any] = {"state": status.state.value, "elapsed_s": round(status.elapsed_s, 1)}
    if status.state is not EngineState.READY:
        return 503, body | {"reason": status.reason}
    body.update(running_requests=engine.running_requests, capacity=engine.capacity.as_dict())
    return 200, body


async def prometheus_metrics() -> Response:
    """vLLM's engine metrics and the app's, in Prometheus' text format."""
    return Response(metrics.exposition(), media_type=metrics.CONTENT_TYPE)


def register(engine: ChatEngine) -> None:
    """Add the routes ahead of Chainlit's catch-all page route (which shadows routes
    added after it); idempotent."""

    async def readyz() -> JSONResponse:
        """The engine's readiness (``readiness``)."""
        code, body = readiness(engine)
        return JSONResponse(body, status_code=code)

    routes = server.router.routes
    present = {getattr(route, "path", None) for route in routes}
    for path, endpoint in zip(PATHS, (healthz, readyz, prometheus_metrics), strict=True):
        if path not in present:
            server.add_api_route(path, endpoint, methods=["GET"])
    for path in reversed(PATHS):
        route = next(r for r in routes if getattr(r, "path", None) == path)
        routes.remove(route)
        routes.insert(0, route)
