"""A user's chats from the history, every value a bound parameter.

What Chainlit's ``SQLAlchemyDataLayer.get_all_user_threads`` returns (threads, their
steps with feedback, their elements), read with SQLAlchemy's expanding ``IN`` parameter
instead of ids pasted into the query's text, each chat's newest ``THREAD_STEPS`` steps.
The app keeps no files (no storage provider), so an element's URL is the one stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlit.types import ThreadDict
from sqlalchemy import bindparam, text

from ..chainlit_door import sql_rows as _rows
from ..conversation import MAX_EXCHANGES

if TYPE_CHECKING:
    from chainlit.data.sql_alchemy import SQLAlchemyDataLayer

__all__ = ["THREAD_COLUMNS", "THREAD_STEPS", "user_threads", "with_steps"]

THREAD_STEPS = 2 * MAX_EXCHANGES  # a chat's messages the model's history can hold

THREAD_COLUMNS = (
    't."id", t."createdAt", t."name", t."userId", t."userIdentifier", t."tags", t."metadata"'
)
_THREADS = text(
    """SELECT t."id", t."createdAt", t."name", t."userId", t."userIdentifier", t."tags",
        t."metadata", MAX(s."createdAt") AS "updatedAt"
    FROM threads t LEFT JOIN steps s ON t."id" = s."threadId"
    WHERE t."userId" = :user_id OR t."id" = :thread_id
    GROUP BY t."id", t."createdAt", t."name", t."userId", t."userIdentifier", t."tags",
        t."metadata"
    ORDER BY "updatedAt" DESC NULLS LAST
    LIMIT :limit"""
)
# Each chat's newest steps only: a resume (and the sidebar's list, which Chainlit builds
# from the same query) reads and sends a bounded number, however long the chat grew (a
# resumed 3,000-step chat took 16 s a time, and the database pool with it).
_STEPS = text(
    """SELECT * FROM (
        SELECT s.*, f."value" AS "feedbackValue", f."comment" AS "feedbackComment",
            f."id" AS "feedbackId",
            ROW_NUMBER() OVER (PARTITION BY s."threadId" ORDER BY s."createdAt" DESC) AS "newest"
        FROM steps s LEFT JOIN feedbacks f ON s."id" = f."forId"
        WHERE s."threadId" IN :ids
    ) kept
    WHERE "newest" <= :most
    ORDER BY "createdAt" ASC"""
).bindparams(bindparam("ids", expanding=True))
_ELEMENTS = text('SELECT * FROM elements WHERE "threadId" IN :ids').bindparams(
    bindparam("ids", expanding=True)
)


def _step(row: dict[str, Any]) -> dict[str, Any]:
    feedback = None
    if row.get("feedbackValue") is not None:
        feedback = {
            "forId": row["id"],
            "id": row.get("feedbackId"),
            "value": row["feedbackValue"],
            "comment": row.get("feedbackComment"),
        }
    shown = row.get("showInput") not in (None, "false")
    fields: tuple[str, ...] = ("id", "name", "type", "threadId", "parentId", "waitForAnswer")
    fields += ("isError",)
    fields += ("tags", "createdAt", "start", "end", "generation", "showInput", "language")
    step = {name: row.get(name) for name in fields}
    return step | {
        "streaming": row.get("streaming") or False,
        "metadata": row.get("metadata") if row.get("metadata") is not None else {},
        "input": (row.get("input") or "") if shown else "",
        "output": row.get("output") or "",
        "feedback": feedback,
    }


def _element(row: dict[str, Any]) -> dict[str, Any]:
    fields: tuple[str, ...] = ("id", "threadId", "type", "chainlitKey", "url", "objectKey")
    fields += ("name", "display")
    fields += ("size", "language", "page", "forId", "mime")
    return {name: row.get(name) for name in fields} | {"props": row.get("props") or "{}"}


async def user_threads(
    layer: SQLAlchemyDataLayer, user_id: str | None, thread_id: str | None
) -> list[ThreadDict]:
    """The user's threads (or the one thread), newest first, with steps and elements."""
    limit = layer.user_thread_limit
    threads = await _rows(layer, _THREADS, user_id=user_id, thread_id=thread_id, limit=limit)
    return await with_steps(layer, threads)


async def with_steps(layer: SQLAlchemyDataLayer, threads: list[dict[str, Any]]) -> list[Any]:
    """Threads' rows (in their order) as Chainlit's ``ThreadDict``, with each one's newest
    ``THREAD_STEPS`` steps and its elements."""
    found: dict[str, Any] = {
        row["id"]: {
            "id": row["id"],
            "createdAt": row["createdAt"],
            "name": row["name"],
            "userId": row["userId"],
            "userIdentifier": row["userIdentifier"],
            "tags": row["tags"],
            "metadata": row["metadata"],
            "steps": [],
            "elements": [],
        }
        for row in threads
    }
    if found:
        for row in await _rows(layer, _STEPS, ids=list(found), most=THREAD_STEPS):
            found[row["threadId"]]["steps"].append(_step(row))
        for row in await _rows(layer, _ELEMENTS, ids=list(found)):
            found[row["threadId"]]["elements"].append(_element(row))
    return list(found.values())
