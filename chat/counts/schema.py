"""The counts' tables, in the SQL both backends read (a row id is each one's own)."""

from __future__ import annotations

__all__ = ["statements"]

TABLES = """
CREATE TABLE IF NOT EXISTS counts_sent (visitor TEXT NOT NULL, at DOUBLE PRECISION NOT NULL);
CREATE INDEX IF NOT EXISTS counts_sent_by_visitor ON counts_sent (visitor, at);
CREATE TABLE IF NOT EXISTS counts_tickets (
  id {id}, visitor TEXT NOT NULL, owner TEXT NOT NULL, core INTEGER NOT NULL,
  started DOUBLE PRECISION
);
CREATE INDEX IF NOT EXISTS counts_tickets_by_core ON counts_tickets (core, started, id);
CREATE INDEX IF NOT EXISTS counts_tickets_by_visitor ON counts_tickets (visitor, core, id);
CREATE TABLE IF NOT EXISTS counts_held (
  id {id}, core INTEGER NOT NULL, s DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS counts_chats (
  address TEXT NOT NULL, owner TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (address, owner)
);
CREATE TABLE IF NOT EXISTS counts_sign_in_tries (
  id {id}, key TEXT NOT NULL, at DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS counts_sign_in_tries_by_key ON counts_sign_in_tries (key, at);
CREATE TABLE IF NOT EXISTS counts_sign_outs (
  visitor TEXT NOT NULL, signed_in_at DOUBLE PRECISION NOT NULL,
  until DOUBLE PRECISION NOT NULL, PRIMARY KEY (visitor, signed_in_at)
);
CREATE TABLE IF NOT EXISTS counts_spent (
  visitor TEXT NOT NULL, day TEXT NOT NULL, tokens BIGINT NOT NULL, PRIMARY KEY (visitor, day)
);
CREATE TABLE IF NOT EXISTS counts_owners (owner TEXT PRIMARY KEY, seen DOUBLE PRECISION NOT NULL);
CREATE TABLE IF NOT EXISTS counts_buckets (
  rate TEXT NOT NULL, key TEXT NOT NULL, tokens DOUBLE PRECISION NOT NULL,
  at DOUBLE PRECISION NOT NULL, PRIMARY KEY (rate, key)
);
"""


def statements(row_id: str) -> list[str]:
    """The schema's statements, with ``row_id`` the backend's column of a row's id."""
    text = TABLES.format(id=row_id)
    return [statement.strip() for statement in text.split(";") if statement.strip()]
