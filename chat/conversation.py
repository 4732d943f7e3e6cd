"""One chat's record of real turns: what the model sees as history.

Chainlit's own chat context also holds notices, errors and stop messages; the model must
see only what the user wrote and what it answered. Each exchange is keyed by the id of
the user's message, so editing that message rewinds the record to just before it.

``record`` returns the exchange as metadata for the reply message; a chat resumed from
the history is rebuilt from its messages' metadata, the same way it was recorded.

Usage::

    conversation = Conversation()
    conversation.rewind_to(message_id)          # an edit: forget it and all after it
    history = conversation.turns()
    reply.metadata = conversation.record(message_id, user_text, reply_text)
    resumed = Conversation.restore(step["metadata"] for step in thread["steps"])
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from engine import Turn

__all__ = ["Conversation"]

EXCHANGE_KEY = "exchange"  # the reply message's metadata key for its exchange


@dataclass
class _Exchange:
    message_id: str
    user_text: str
    reply_text: str


@dataclass
class Conversation:
    """The user/assistant exchanges of one chat, oldest first."""

    _exchanges: list[_Exchange] = field(default_factory=list)

    def turns(self) -> list[Turn]:
        turns: list[Turn] = []
        for exchange in self._exchanges:
            turns += [Turn("user", exchange.user_text), Turn("assistant", exchange.reply_text)]
        return turns

    def rewind_to(self, message_id: str) -> int:
        """Drop the exchange of ``message_id`` and every later one; return how many."""
        for index, exchange in enumerate(self._exchanges):
            if exchange.message_id == message_id:
                dropped = len(self._exchanges) - index
                del self._exchanges[index:]
                return dropped
        return 0

    def record(self, message_id: str, user_text: str, reply_text: str) -> dict[str, Any]:
        """Add an exchange; return it as the reply message's metadata."""
        exchange = _Exchange(message_id, user_text, reply_text)
        self._exchanges.append(exchange)
        return {EXCHANGE_KEY: asdict(exchange)}

    @classmethod
    def restore(cls, metadata: Iterable[Mapping[str, Any] | str | None]) -> Conversation:
        """The conversation a chat's messages recorded, oldest first (others are skipped).

        The history hands metadata back as JSON text (SQLite, PostgreSQL) or parsed.
        """
        conversation = cls()
        for item in metadata:
            if isinstance(item, str):
                with contextlib.suppress(ValueError):
                    item = json.loads(item)
            stored = item.get(EXCHANGE_KEY) if isinstance(item, Mapping) else None
            if not isinstance(stored, dict):
                continue
            try:
                exchange = _Exchange(**stored)
            except TypeError:  # written by another version: not an exchange it knows
                continue
            conversation.rewind_to(exchange.message_id)  # an edit answered again later
            conversation._exchanges.append(exchange)
        return conversation

    def __len__(self) -> int:
        return len(self._exchanges)
