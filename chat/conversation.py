"""One chat's record of real turns: what the model sees as history.

Chainlit's own chat context also holds notices, errors and stop messages; the model must
see only what the user wrote and what it answered. Each exchange is keyed by the id of
the user's message, so editing that message rewinds the record to just before it.

``record`` returns the exchange as metadata for the reply message, signed with the app's
key; a chat resumed from the history is rebuilt from its messages' metadata, the same way
it was recorded. A client chooses the type and metadata of the messages it sends, so an
exchange counts only with its signature: the model's history is what the app wrote.

Usage::

    conversation = Conversation(seal)
    conversation.rewind_to(message_id)          # an edit: forget it and all after it
    history = conversation.turns()
    reply.metadata = conversation.record(message_id, user_text, reply_text)
    resumed = Conversation.restore(thread["steps"], seal)
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from engine import Turn

__all__ = [
    "EXCHANGE_KEY",
    "NOTES_KEY",
    "Conversation",
    "ExchangeSigner",
    "last_reply_step",
    "signed_exchange",
    "step_metadata",
]

EXCHANGE_KEY = "exchange"  # the reply message's metadata key for its exchange
NOTES_KEY = "notes"  # ... and for its footer notes (chat.ui.streaming; the export reads them)
# Exchanges a chat keeps for the model (what it holds stays bounded; the prompt drops
# the oldest turns to fit the context long before this many).
MAX_EXCHANGES = 200
SIGNATURE_KEY = "signature"  # and for the app's signature of it


@dataclass(frozen=True)
class ExchangeSigner:
    """The app's signature on the exchanges it records.

    ``legacy_before``: exchanges stored before the app signed them (a history older than
    this version) are trusted when their message is older than this time; Chainlit sets
    a message's time itself when it stores it, so a client cannot date one back.
    """

    key: bytes
    legacy_before: str | None = None  # ISO time, as Chainlit writes createdAt

    def sign(self, exchange: Mapping[str, Any]) -> str:
        text = json.dumps(exchange, ensure_ascii=False, sort_keys=True).encode()
        return hmac.new(self.key, text, hashlib.sha256).hexdigest()

    def trusts(self, metadata: Mapping[str, Any], created_at: str | None) -> bool:
        signature = metadata.get(SIGNATURE_KEY)
        if isinstance(signature, str):
            return hmac.compare_digest(signature, self.sign(metadata[EXCHANGE_KEY]))
        old = self.legacy_before is not None and created_at is not None
        return old and str(created_at) < str(self.legacy_before)


def step_metadata(step: Mapping[str, Any]) -> Mapping[str, Any]:
    """A message's metadata, as Chainlit holds it (a dict) or the history hands it back
    (JSON text, SQLite and PostgreSQL); empty if it is neither."""
    item = step.get("metadata")
    if isinstance(item, str):
        with contextlib.suppress(ValueError):
            item = json.loads(item)
    return item if isinstance(item, Mapping) else {}


def last_reply_step(
    steps: Iterable[Mapping[str, Any]], seal: ExchangeSigner
) -> Mapping[str, Any] | None:
    """The message of the chat's last exchange the app signed: its last reply."""
    signed = [s for s in steps if signed_exchange(s, seal) is not None]
    return signed[-1] if signed else None


def signed_exchange(step: Mapping[str, Any], seal: ExchangeSigner) -> Mapping[str, Any] | None:
    """The exchange ``step`` records, if the app signed it (or stored it before it signed)."""
    item = step_metadata(step)
    exchange = item.get(EXCHANGE_KEY)
    if not isinstance(exchange, dict) or not seal.trusts(item, step.get("createdAt")):
        return None
    return exchange


@dataclass
class _Exchange:
    message_id: str
    user_text: str
    reply_text: str


@dataclass
class Conversation:
    """The user/assistant exchanges of one chat, oldest first."""

    seal: ExchangeSigner
    _exchanges: list[_Exchange] = field(default_factory=list)

    def turns(self) -> list[Turn]:
        turns: list[Turn] = []
        for exchange in self._exchanges:
            turns += [Turn("user", exchange.user_text), Turn("assistant", exchange.reply_text)]
        return turns

    def last(self) -> tuple[str, str] | None:
        """The last exchange's message id and the user's text (None: no exchange yet)."""
        if not self._exchanges:
            return None
        return self._exchanges[-1].message_id, self._exchanges[-1].user_text

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
        del self._exchanges[:-MAX_EXCHANGES]
        stored = asdict(exchange)
        return {EXCHANGE_KEY: stored, SIGNATURE_KEY: self.seal.sign(stored)}

    def adopt(self, metadata: Mapping[str, Any]) -> None:
        """The exchange another session of this chat recorded in a reply's ``metadata`` (a
        reply a reloaded page followed), if the app signed it."""
        for exchange in Conversation.restore([{"metadata": metadata}], self.seal)._exchanges:
            self.rewind_to(exchange.message_id)
            self._exchanges.append(exchange)

    @classmethod
    def restore(cls, steps: Iterable[Mapping[str, Any]], seal: ExchangeSigner) -> Conversation:
        """The conversation a chat's messages recorded, oldest first: only exchanges the
        app signed (or stored before it signed them); every other message is skipped.

        The history hands metadata back as JSON text (SQLite, PostgreSQL) or parsed.
        """
        conversation = cls(seal)
        for step in steps:
            stored = signed_exchange(step, seal)
            if stored is None:
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
