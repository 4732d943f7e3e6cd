"""The Chainlit door: every read or write of Chainlit's, python-socketio's and
python-engineio's internals, in one package, as ``engine.vllm_door.internals`` is vLLM's.

Read this before upgrading Chainlit: ``tests/chat/test_chainlit_door.py`` checks each
internal touched here against the installed versions and names the one that moved;
``tests/test_layout.py`` refuses those names anywhere else in ``chat/``.

* ``sockets``: the socket events' chains (``wire``), a socket closed from the server,
  frames, pings and origins of engine.io, a chat's messages in Chainlit's context, a
  session's task, a session the page asked cleared, a notice said on a socket outside
  any handler, sessions held, an event received;
* ``server``: Chainlit's web app (routes put first, the sign-in's two functions wrapped,
  CORS origins, the files folder), the callbacks the app registered, the message
  handler without its step, the data layer's SQL session;
* ``parts``: Chainlit's parts the app reads beyond ``cl`` (its config, the server's app, the
  socket session's class, the current session and its emitter, the sign-in's tokens);
* ``patches``: two defects of Chainlit that hurt an app with an engine in its process
  (the package's ``__getattr__``, a blocking sleep in every message and step).

Idempotent without marker attributes: each original is kept the first time in a table of
this package (a reloaded app, ``chainlit run -w``, builds from the originals again).
"""

from __future__ import annotations

from .parts import (
    SOCKET_IO_PATH,
    WebsocketSession,
    config,
    context_session,
    delete_step,
    ensure_jwt_secret,
    get_current_user,
    get_jwt_secret,
    get_token_from_cookies,
    send_step,
    server_app,
    update_step,
)
from .patches import drop_blocking_sleep, guard_module_getattr
from .server import (
    action_names,
    add_routes_first,
    answer_messages,
    app_handles,
    check_sign_ins,
    data_layer,
    private_files_folder,
    run_action,
    set_cors_origins,
    sql_rows,
    sql_run,
    use_engine,
    use_oauth_provider,
    using_data_layer,
)
from .sockets import (
    Handler,
    Step,
    chainlit_events,
    chat_messages,
    check_socket_origins,
    close_socket,
    enter,
    leaving,
    new_thread,
    receive,
    run_as_task,
    say,
    session_by_id,
    session_of,
    session_task,
    sessions_held,
    size_frames,
    trim_chat_messages,
    wire,
)

__all__ = [
    "SOCKET_IO_PATH",
    "Handler",
    "Step",
    "WebsocketSession",
    "action_names",
    "add_routes_first",
    "answer_messages",
    "app_handles",
    "chainlit_events",
    "chat_messages",
    "check_sign_ins",
    "check_socket_origins",
    "close_socket",
    "config",
    "context_session",
    "data_layer",
    "delete_step",
    "drop_blocking_sleep",
    "ensure_jwt_secret",
    "enter",
    "get_current_user",
    "get_jwt_secret",
    "get_token_from_cookies",
    "guard_module_getattr",
    "leaving",
    "new_thread",
    "private_files_folder",
    "receive",
    "run_action",
    "run_as_task",
    "say",
    "send_step",
    "server_app",
    "session_by_id",
    "session_of",
    "session_task",
    "sessions_held",
    "set_cors_origins",
    "size_frames",
    "sql_rows",
    "sql_run",
    "trim_chat_messages",
    "update_step",
    "use_engine",
    "use_oauth_provider",
    "using_data_layer",
    "wire",
]
