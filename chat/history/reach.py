"""The databases on servers, reached before anything else loads (the history's, and the
counts' of replicas on several machines): a wrong address stops ``python -m serve`` in a
second, in one line naming the setting, before vLLM's and Chainlit's imports."""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import create_async_engine

from settings.settings import Settings, SettingsError, env_name
from settings.urls import redact

__all__ = ["check_history", "history_problem"]

CONNECT_TIMEOUT_S = 10


def history_problem(url: str, exc: BaseException, setting: str = "history_url") -> str:
    """The line that stops the app when a database cannot be opened (no password in it)."""
    cause = next(iter(str(exc).strip().splitlines()), "")
    what = "the chat history" if setting == "history_url" else "the visitors' counts"
    fix = "set it to off" if setting == "history_url" else "leave it unset"
    return (
        f"{env_name(setting)}={redact(url)!r}: cannot open {what} "
        f"({type(exc).__name__}: {cause}); check the URL and that the database is "
        f"reachable, or {fix}"
    )


def check_history(settings: Settings) -> None:
    """Connect once to each database server the settings name (the history's, if chats are
    kept on one; the counts'): a wrong address stops the start in a second, before the web
    app's and vLLM's imports (a SQLite file is opened with the tables, at the app's start)."""
    history = settings.kept_history_url
    if history is not None and not history.startswith("sqlite"):
        _reach(history, "history_url")
    if settings.counts_url is not None:
        _reach(settings.counts_url, "counts_url")


def _reach(url: str, setting: str) -> None:
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
        raise SettingsError(history_problem(url, exc, setting)) from None
