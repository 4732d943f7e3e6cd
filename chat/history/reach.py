"""The history's database server, reached before anything else loads: a wrong address
stops ``python -m serve`` in a second, in one line, before vLLM's and Chainlit's imports."""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import create_async_engine

from settings.settings import Settings, SettingsError, env_name
from settings.urls import redact

__all__ = ["check_history", "history_problem"]

CONNECT_TIMEOUT_S = 10


def history_problem(url: str, exc: BaseException) -> str:
    """The line that stops the app when its history cannot be opened (no password in it)."""
    cause = next(iter(str(exc).strip().splitlines()), "")
    return (
        f"{env_name('history_url')}={redact(url)!r}: cannot open the chat history "
        f"({type(exc).__name__}: {cause}); check the URL and that the database is "
        "reachable, or set it to off"
    )


def check_history(settings: Settings) -> None:
    """Connect once to the history's database server, if chats are kept on one: a wrong
    address stops the start in a second, before the web app's and vLLM's imports (a
    SQLite file is opened with the tables, at the app's start)."""
    url = settings.kept_history_url
    if url is None or url.startswith("sqlite"):
        return

    async def connect() -> None:
        engine = create_async_engine(url, connect_args={"timeout": CONNECT_TIMEOUT_S})
        try:
            async with engine.connect():
                pass
        finally:
            await engine.dispose()

    try:
        asyncio.run(connect())
    except Exception as exc:
        raise SettingsError(history_problem(url, exc)) from None
