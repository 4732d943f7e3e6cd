"""The contract with Chainlit's, python-socketio's and python-engineio's internals
(``chat.chainlit_door``): each test names the versions and the internal that moved, so an
upgrade says what to read again. They look at the installed packages without starting a
server; the chat, access and history tests run the door for real.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import time
from importlib.metadata import version

import chainlit
import chainlit.auth
import chainlit.config
import chainlit.server
import chainlit.socket
import pytest
from chainlit.chat_context import chat_contexts
from chainlit.context import init_ws_context
from chainlit.data.sql_alchemy import SQLAlchemyDataLayer
from chainlit.emitter import ChainlitEmitter
from chainlit.session import BaseSession, WebsocketSession, ws_sessions_id
from starlette.middleware.cors import CORSMiddleware

from chat import chainlit_door

# The events the app's steps wrap (chat.runtime), and those the front door rules on.
EVENTS = {"connect", "connection_successful", "client_message", "edit_message", "disconnect"}
EVENTS |= {"stop", "chat_settings_change"}


def moved(internal: str, what: str) -> str:
    versions = ", ".join(
        f"{name} {version(name)}" for name in ("chainlit", "python-socketio", "python-engineio")
    )
    return f"{versions}: {internal} moved ({what}); read chat/chainlit_door/"


def names_read(function: object) -> set[str]:
    """The global names a function's code reads (where Chainlit calls a function by name)."""
    code = getattr(inspect.unwrap(function), "__code__")  # noqa: B009
    return set(code.co_names)


def test_the_socket_events_the_app_wraps_are_chainlits() -> None:
    handlers = chainlit.server.sio.handlers
    assert chainlit_door.sockets.NAMESPACE in handlers, moved("sio.handlers['/']", "no namespace")
    missing = EVENTS - chainlit_door.chainlit_events()
    assert not missing, moved("sio.handlers", f"no handler for {sorted(missing)}")
    for event in EVENTS:
        handler = handlers["/"][event]
        assert inspect.iscoroutinefunction(inspect.unwrap(handler)), moved(event, "not async")


def test_engineio_reads_the_frame_ping_and_origin_settings_from_its_server() -> None:
    eio = chainlit.server.sio.eio
    for name in ("max_http_buffer_size", "ping_interval", "ping_timeout", "cors_allowed_origins"):
        assert hasattr(eio, name), moved(f"sio.eio.{name}", "not an attribute")
    source = inspect.getsource(type(eio).__mro__[1])  # engineio.base_server.BaseServer
    assert "cors_allowed_origins" in source and "max_http_buffer_size" in source, moved(
        "engineio's BaseServer", "the settings are no longer read there"
    )


def test_a_chats_messages_and_sessions_are_where_the_door_reads_them() -> None:
    assert isinstance(chat_contexts, dict), moved(
        "chainlit.chat_context.chat_contexts", "not a dict"
    )
    assert isinstance(ws_sessions_id, dict), moved("chainlit.session.ws_sessions_id", "not a dict")
    params = inspect.signature(WebsocketSession.__init__).parameters
    assert "thread_id" in params, moved("WebsocketSession", f"arguments {list(params)}")
    assert "current_task" in inspect.get_annotations(BaseSession), moved(
        "BaseSession.current_task", "not declared"
    )
    assert list(inspect.signature(init_ws_context).parameters)[:1] == ["session_or_sid"], moved(
        "chainlit.context.init_ws_context", "its arguments changed"
    )
    for name in ("task_start", "task_end", "send_step"):
        assert callable(getattr(ChainlitEmitter, name, None)), moved(
            f"ChainlitEmitter.{name}", "not a method"
        )
    socket_module = inspect.getsource(chainlit.socket)  # a page's "new chat" sets it
    assert "session.to_clear = True" in socket_module and "if session.to_clear" in socket_module, (
        moved("chainlit.socket's clear_session", "no longer sets WebsocketSession.to_clear")
    )
    resume, sent = "await config.code.on_chat_resume(thread)", "emitter.resume_thread(thread)"
    assert 0 < socket_module.find(resume) < socket_module.find(sent), moved(
        "chainlit.socket's connection_successful",
        "the thread on_chat_resume gets is no longer the one sent to the page after it",
    )


def test_trimming_keeps_the_newest_messages() -> None:
    chat_contexts["door-test"] = list(range(10))  # type: ignore[arg-type]
    try:
        chainlit_door.trim_chat_messages("door-test", 3)
        assert chainlit_door.chat_messages("door-test") == [7, 8, 9]
        assert chainlit_door.chat_messages("no-such-chat") == []
    finally:
        del chat_contexts["door-test"]


def test_the_sign_in_runs_through_the_two_functions_the_door_wraps() -> None:
    for module, name in (
        (chainlit.auth, "authenticate_user"),
        (chainlit.server, "_authenticate_user"),
    ):
        assert inspect.iscoroutinefunction(getattr(module, name, None)), moved(
            f"{module.__name__}.{name}", "not an async function"
        )
    assert "authenticate_user" in names_read(chainlit.auth.get_current_user), moved(
        "chainlit.auth.get_current_user", "no longer calls authenticate_user by name"
    )
    issuers = [
        route.endpoint
        for route in chainlit.server.app.router.routes
        if "_authenticate_user" in names_read(getattr(route, "endpoint", None) or (lambda: 0))
    ]
    assert len(issuers) >= 3, moved("chainlit.server's sign-in routes", "no _authenticate_user")


def test_the_servers_routes_end_with_the_page_route_and_cors_is_a_user_middleware() -> None:
    paths = [getattr(route, "path", None) for route in chainlit.server.app.router.routes]
    assert "/{full_path:path}" in paths, moved("the page route", f"paths {paths[-3:]}")
    factories = [m.cls for m in chainlit.server.app.user_middleware]
    assert CORSMiddleware in factories, moved("Chainlit's CORSMiddleware", "not a user middleware")


def test_the_files_folder_and_the_message_handler_are_where_the_door_sets_them() -> None:
    for module in (chainlit.server, chainlit.config):
        assert hasattr(module, "FILES_DIRECTORY"), moved(f"{module.__name__}.FILES_DIRECTORY", "")
    assert hasattr(chainlit.config.config.code, "on_message"), moved("config.code.on_message", "")
    assert "process_message" in names_read(chainlit.socket.message), moved(
        "client_message", "no longer hands the message to process_message"
    )


def test_the_data_layer_has_its_session_and_its_cleaning() -> None:
    for name in ("async_session", "clean_result", "user_thread_limit"):
        assert hasattr(SQLAlchemyDataLayer, name) or name in inspect.getsource(
            SQLAlchemyDataLayer.__init__
        ), moved(f"SQLAlchemyDataLayer.{name}", "not there")


def test_the_two_defects_the_patches_mend_are_still_there() -> None:
    """When Chainlit fixes one, this says which patch to drop."""
    chainlits = chainlit_door.patches._GETATTR.get("chainlit", chainlit.__dict__["__getattr__"])
    with pytest.raises(KeyError):  # Chainlit#2499: fixed upstream? drop guard_module_getattr
        chainlits("no_such_name")
    for module in map(importlib.import_module, ("chainlit.message", "chainlit.step")):
        assert module.time is time or type(module.time).__name__ == "_TimeWithoutSleep", moved(
            f"{module.__name__}.time", "the module no longer imports time: drop the sleep patch"
        )


def test_the_getattr_guard_is_idempotent_and_raises_attribute_error() -> None:
    chainlit_door.guard_module_getattr(chainlit)
    chainlit_door.guard_module_getattr(chainlit)
    assert not hasattr(chainlit, "no_such_name")
    assert chainlit.Message is importlib.import_module("chainlit.message").Message


def test_a_session_without_a_task_has_none() -> None:
    class Session:
        current_task = None

    assert chainlit_door.session_task(Session()) is None  # type: ignore[arg-type]

    async def running() -> asyncio.Task[object] | None:
        Session.current_task = asyncio.current_task()  # type: ignore[assignment]
        return chainlit_door.session_task(Session())  # type: ignore[arg-type]

    assert isinstance(asyncio.run(running()), asyncio.Task)
