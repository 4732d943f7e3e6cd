"""One chat's record of real turns: what the model sees as history.

Chainlit's own chat context also holds notices, errors and stop messages; the model must
see only what the user wrote and what it answered. Each exchange is keyed by the id of
the user's message, so editing that message rewinds the record to just before it.

Usage::

    conversation = Conversation()
    conversation.rewind_to(message_id)          # an edit: forget it and all after it
    history = conversation.turns()
    conversation.record(message_id, user_text, reply_text)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .prompt import Turn

__all__ = ["Conversation"]


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

    def record(self, message_id: str, user_text: str, reply_text: str) -> None:
        self._exchanges.append(_Exchange(message_id, user_text, reply_text))

    def __len__(self) -> int:
        return len(self._exchanges)
