"""The ``web_messages`` table: what the web chat channel's pages show, per visitor chat.

Each change of a message takes the next ``seq`` of its chat, and a page resumes with the rows
whose ``seq`` is past the last one it saw (:func:`changes_since`), so a reconnect gets every
change once. A row added twice under the same outbox ``delivery_id`` or browser ``event_id``
is the row already there.

Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

__all__ = [
    "WebMessage",
    "WebMessageIn",
    "add_message",
    "changes_since",
    "delete_message",
    "edit_message",
    "message_by_id",
]

_COLUMNS = (
    "id, chat_id, seq, role, format, body, file_path, file_name, file_size, event_id, deleted, created_at"
)


@dataclass(frozen=True, slots=True)
class WebMessage:
    """One message of a web chat as pages show it; ``seq`` is its latest change."""

    id: int
    chat_id: str
    seq: int
    role: str  # "user" or "bot"
    format: str  # "html" (sanitized), "plain" or "file"
    body: str
    file_path: str | None
    file_name: str | None
    file_size: int | None
    event_id: str | None
    deleted: bool
    created_at: float


@dataclass(frozen=True, slots=True)
class WebMessageIn:
    """A message to add: ``delivery_id`` (an outbox row) or ``event_id`` (a browser post) keys it."""

    channel: str
    chat_id: str
    role: str
    format: str
    body: str
    delivery_id: int | None = None
    event_id: str | None = None
    file_path: str | None = None
    file_name: str | None = None
    file_size: int | None = None


def _next_seq(conn: sqlite3.Connection, channel: str, chat_id: str) -> int:
    (seq,) = conn.execute(
        "SELECT COALESCE(MAX(seq), 0) + 1 FROM web_messages WHERE channel = ? AND chat_id = ?",
        (channel, chat_id),
    ).fetchone()
    return int(seq)


def _row(conn: sqlite3.Connection, where: str, params: tuple[object, ...]) -> WebMessage | None:
    found = conn.execute(f"SELECT {_COLUMNS} FROM web_messages WHERE {where}", params).fetchone()
    return _message(found) if found is not None else None


def _message(row: tuple[object, ...]) -> WebMessage:
    values = list(row)
    values[10] = bool(values[10])
    return WebMessage(*values)  # type: ignore[arg-type]


def add_message(conn: sqlite3.Connection, message: WebMessageIn, now: float) -> tuple[WebMessage, bool]:
    """Add ``message``; returns it and whether it is new (False: its delivery or event was
    already added, and that row is returned unchanged)."""
    m = message
    if m.delivery_id is not None:
        existing = _row(conn, "channel = ? AND delivery_id = ?", (m.channel, m.delivery_id))
        if existing is not None:
            return existing, False
    if m.event_id is not None:
        existing = _row(
            conn, "channel = ? AND chat_id = ? AND event_id = ?", (m.channel, m.chat_id, m.event_id)
        )
        if existing is not None:
            return existing, False
    (row_id,) = conn.execute(
        "INSERT INTO web_messages (channel, chat_id, seq, role, format, body, file_path, file_name, "
        "file_size, delivery_id, event_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (
            m.channel,
            m.chat_id,
            _next_seq(conn, m.channel, m.chat_id),
            m.role,
            m.format,
            m.body,
            m.file_path,
            m.file_name,
            m.file_size,
            m.delivery_id,
            m.event_id,
            now,
        ),
    ).fetchone()
    added = _row(conn, "id = ?", (row_id,))
    assert added is not None
    return added, True


def edit_message(
    conn: sqlite3.Connection, channel: str, chat_id: str, message_id: int, fmt: str, body: str
) -> WebMessage | None:
    """Replace a message's text; None when the chat has no such message (or it was deleted).
    An edit that changes nothing takes no new seq."""
    current = _row(conn, "id = ? AND channel = ? AND chat_id = ?", (message_id, channel, chat_id))
    if current is None or current.deleted:
        return None
    if current.format == fmt and current.body == body:
        return current
    conn.execute(
        "UPDATE web_messages SET format = ?, body = ?, seq = ? WHERE id = ?",
        (fmt, body, _next_seq(conn, channel, chat_id), message_id),
    )
    return _row(conn, "id = ?", (message_id,))


def delete_message(
    conn: sqlite3.Connection, channel: str, chat_id: str, message_id: int
) -> WebMessage | None:
    """Mark a message deleted (its text is dropped); None when the chat has no such message.
    Deleting a deleted message changes nothing."""
    current = _row(conn, "id = ? AND channel = ? AND chat_id = ?", (message_id, channel, chat_id))
    if current is None or current.deleted:
        return current
    conn.execute(
        "UPDATE web_messages SET deleted = 1, body = '', seq = ? WHERE id = ?",
        (_next_seq(conn, channel, chat_id), message_id),
    )
    return _row(conn, "id = ?", (message_id,))


def changes_since(
    conn: sqlite3.Connection, channel: str, chat_id: str, seq: int, limit: int
) -> list[WebMessage]:
    """The chat's messages changed after ``seq``, in change order, at most ``limit``: the
    first ones after ``seq`` (ask again from the last one for the rest), or, from ``seq`` 0
    (a page opening the chat afresh), the ``limit`` latest."""
    order = "DESC" if seq == 0 else "ASC"
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM web_messages WHERE channel = ? AND chat_id = ? AND seq > ? "
        f"ORDER BY seq {order} LIMIT ?",
        (channel, chat_id, seq, limit),
    ).fetchall()
    found = [_message(r) for r in rows]
    return found[::-1] if seq == 0 else found


def message_by_id(conn: sqlite3.Connection, channel: str, message_id: int) -> WebMessage | None:
    return _row(conn, "id = ? AND channel = ?", (message_id, channel))
