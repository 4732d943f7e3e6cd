"""Chainlit's web app and modules from the inside: the order of its routes, the two
functions its sign-in runs through, its OAuth provider set from the app's settings, its
CORS origins, its files folder, the message handler's step, and its SQL data layer's
session."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import chainlit.auth
import chainlit.config
import chainlit.data
import chainlit.oauth_providers
import chainlit.server
from chainlit.config import config
from chainlit.utils import wrap_user_function
from sqlalchemy.ext.asyncio import async_sessionmaker
from starlette.middleware.cors import CORSMiddleware

if TYPE_CHECKING:
    from chainlit.data.sql_alchemy import SQLAlchemyDataLayer

__all__ = [
    "action_names",
    "add_routes_first",
    "answer_messages",
    "app_handles",
    "check_sign_ins",
    "data_layer",
    "private_files_folder",
    "run_action",
    "set_cors_origins",
    "sql_rows",
    "sql_run",
    "use_engine",
    "use_oauth_provider",
    "using_data_layer",
]

AsyncFunction = Callable[..., Awaitable[Any]]
_ORIGINAL: dict[str, AsyncFunction] = {}  # Chainlit's sign-in functions, kept the first time
FILES_PREFIX = "ernie-chainlit-files-"


def add_routes_first(endpoints: Mapping[str, Callable[..., Awaitable[Any]]]) -> None:
    """``GET`` routes for ``endpoints`` (path -> endpoint; a path already served keeps
    its route: a reloaded app adds none twice), moved ahead of Chainlit's (its catch-all
    page route shadows every route added after it), in the order given."""
    app = chainlit.server.app
    present = {getattr(route, "path", None) for route in app.router.routes}
    for path, endpoint in endpoints.items():
        if path not in present:
            app.add_api_route(path, endpoint, methods=["GET"])
    routes = app.router.routes
    for path in reversed(list(endpoints)):
        route = next(r for r in routes if getattr(r, "path", None) == path)
        routes.remove(route)
        routes.insert(0, route)


def check_sign_ins(
    checked_session: Callable[[AsyncFunction], AsyncFunction],
    checked_issue: Callable[[AsyncFunction], AsyncFunction],
) -> None:
    """Every request's session goes through ``checked_session(chainlit's)`` (Chainlit's
    ``get_current_user``, HTTP routes and the websocket, calls ``authenticate_user``),
    and every token issued through ``checked_issue(chainlit's)`` (each sign-in route:
    password, header, renewal). Idempotent: built from Chainlit's own each time."""
    session = _ORIGINAL.setdefault("authenticate_user", chainlit.auth.authenticate_user)
    issue = _ORIGINAL.setdefault("_authenticate_user", chainlit.server._authenticate_user)
    chainlit.auth.authenticate_user = checked_session(session)  # type: ignore[assignment]
    chainlit.server._authenticate_user = checked_issue(issue)  # type: ignore[assignment]


def set_cors_origins(allowed: list[str]) -> None:
    """The origins Chainlit's CORS middleware lets read answers across sites."""
    for middleware in chainlit.server.app.user_middleware:
        factory: object = middleware.cls
        if factory is CORSMiddleware:
            middleware.kwargs["allow_origins"] = list(allowed)


def private_files_folder() -> Path:
    """Chainlit keeps uploads in ``.files`` beside the app's code and removes it at exit:
    moved to a new private folder of this process's (idempotent); the folder."""
    current = Path(chainlit.server.FILES_DIRECTORY)  # type: ignore[attr-defined]
    if current.name.startswith(FILES_PREFIX):
        return current
    folder = Path(tempfile.mkdtemp(prefix=FILES_PREFIX))
    chainlit.config.FILES_DIRECTORY = folder  # read by sessions when they start
    chainlit.server.FILES_DIRECTORY = folder  # type: ignore[attr-defined]  # removed at exit
    return folder


def action_names() -> frozenset[str]:
    """The actions (buttons) the app registered callbacks for."""
    return frozenset(config.code.action_callbacks or {})


def app_handles(callback: str) -> bool:
    """Whether the app registered Chainlit's ``callback`` (``on_window_message``,
    ``action_callbacks``, ...): a feature it lacks is refused at the doors."""
    return bool(getattr(config.code, callback))


async def run_action(session_id: str, action: dict[str, Any]) -> Any:
    """What Chainlit's ``POST /project/action`` does for ``action`` of a session: its
    callback, in the session's context (the in-process tests click buttons so)."""
    from chainlit.action import Action
    from chainlit.context import init_ws_context
    from chainlit.session import WebsocketSession

    init_ws_context(WebsocketSession.get_by_id(session_id))
    return await config.code.action_callbacks[action["name"]](Action(**action))


def data_layer() -> Any:
    """The data layer Chainlit writes the history with (None: no history)."""
    return chainlit.data.get_data_layer()


def answer_messages(handler: Callable[[Any], Awaitable[None]]) -> None:
    """Chainlit's message handler: ``handler``, with no step around it.

    ``@cl.on_message`` runs each message's handler inside a ``Step`` named ``on_message``:
    two websocket packets and, with the history on, two database writes of the message's
    text once more, for every message, while the chat shows no such step."""
    config.code.on_message = wrap_user_function(handler)


async def sql_rows(layer: SQLAlchemyDataLayer, query: Any, **values: Any) -> list[dict[str, Any]]:
    """``query``'s rows, on the data layer's own session, cleaned as Chainlit cleans its
    own (UUIDs as text)."""
    async with layer.async_session() as session:
        result = await session.execute(query, values)
        rows = [dict(row._mapping) for row in result.fetchall()]
    return list(layer.clean_result(rows))


def use_oauth_provider(
    name: str, client: tuple[str, str], urls: tuple[str, str, str], *, scopes: str, user_claim: str
) -> None:
    """Chainlit's generic OAuth provider, named ``name`` (its routes
    ``/auth/oauth/<name>``), with this client (id, secret) and the provider's authorize,
    token and user-info URLs. Chainlit reads its providers' settings from the environment
    once, at its import, and asks the environment whether one is configured."""
    provider = next(
        p
        for p in chainlit.oauth_providers.providers
        if isinstance(p, chainlit.oauth_providers.GenericOAuthProvider)
    )
    provider.id = name
    provider.client_id, provider.client_secret = client
    provider.authorize_url, provider.token_url, provider.user_info_url = urls
    provider.scopes, provider.user_identifier = scopes, user_claim
    provider.authorize_params["scope"] = scopes
    values = (*client, *urls, scopes)
    os.environ.update(dict(zip(provider.env, values, strict=True)))


async def sql_run(layer: SQLAlchemyDataLayer, query: Any, **values: Any) -> int:
    """Run one writing statement on the data layer's own session, committed; the rows it
    changed."""
    async with layer.async_session() as session:
        result = await session.execute(query, values)
        await session.commit()
    return int(getattr(result, "rowcount", 0) or 0)


def use_engine(layer: SQLAlchemyDataLayer, engine: Any) -> None:
    """The data layer's statements go through ``engine`` (an ``AsyncEngine``; Chainlit's
    own is built with the driver's and the pool's defaults)."""
    layer.engine = engine
    layer.async_session = async_sessionmaker(engine, expire_on_commit=False)


@contextlib.contextmanager
def using_data_layer(layer: object) -> Iterator[None]:
    """Chainlit writes and reads through ``layer`` meanwhile (it settles on one data layer
    for the process at first use; the in-process tests change it), then as before."""
    before = chainlit.data._data_layer, chainlit.data._data_layer_initialized
    chainlit.data._data_layer, chainlit.data._data_layer_initialized = layer, True  # type: ignore[assignment]
    try:
        yield
    finally:
        chainlit.data._data_layer, chainlit.data._data_layer_initialized = before
