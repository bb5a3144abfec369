"""The ``messages`` table and ``inbox_dedupe``: what was said in a thread, and which platform
events were already taken in.

Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "NO_SENDERS",
    "BatchSenders",
    "MessageRow",
    "PendingFiles",
    "Role",
    "add_message",
    "album_progress",
    "batch_senders",
    "messages_after",
    "messages_with_staged_files",
    "newest_messages",
    "platform_message_id",
    "record_event",
    "set_attachments",
]

Role = Literal["user", "assistant", "system"]


def record_event(conn: sqlite3.Connection, channel: str, event_id: str, status: str, now: float) -> bool:
    """Remember a platform event as taken in with ``status``; False when it already was
    (a redelivery, which must change nothing)."""
    cursor = conn.execute(
        "INSERT INTO inbox_dedupe (channel, event_id, status, received_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING",
        (channel, event_id, status, now),
    )
    return cursor.rowcount > 0


def add_message(
    conn: sqlite3.Connection,
    thread_id: int,
    role: Role,
    text: str,
    *,
    created_at: float,
    sender_id: str | None = None,
    sender_name: str | None = None,
    persona: str | None = None,
    run_id: int | None = None,
    platform_message_id: str | None = None,
    reply_to: str | None = None,
    attachments: str | None = None,
    event_id: str | None = None,
    sort_key: float | None = None,
    album: str | None = None,
) -> int:
    """Store one message; returns its id.

    Args:
        attachments: a JSON list of the message's files, ``None`` when it has none.
        sort_key: its place in the conversation when that is not its id (a reply sorts
            right after the last message it answers).
    """
    (message_id,) = conn.execute(
        "INSERT INTO messages (thread_id, role, sender_id, sender_name, text, persona, run_id, "
        "platform_message_id, reply_to, attachments, event_id, sort_key, created_at, album) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (
            thread_id,
            role,
            sender_id,
            sender_name,
            text,
            persona,
            run_id,
            platform_message_id,
            reply_to,
            attachments,
            event_id,
            sort_key,
            created_at,
            album,
        ),
    ).fetchone()
    return int(message_id)


def album_progress(conn: sqlite3.Connection, channel: str, chat_id: str, album: str) -> str | None:
    """How far the earlier messages of ``album`` in a chat got: ``"open"`` while one of them
    waits for or is in its turn, ``"answered"`` when their turn ended, ``None`` when none of
    them was queued (none arrived, or they were stored for context only)."""
    statuses = {
        row[0]
        for row in conn.execute(
            "SELECT q.status FROM messages m JOIN threads t ON t.id = m.thread_id "
            "JOIN queue_items q ON q.message_id = m.id "
            "WHERE m.album = ? AND t.channel = ? AND t.chat_id = ?",
            (album, channel, chat_id),
        )
    }
    if not statuses:
        return None
    return "open" if statuses & {"pending", "leased"} else "answered"


def platform_message_id(conn: sqlite3.Connection, message_id: int) -> str | None:
    """The platform's id of a stored message (what a reply quotes)."""
    row = conn.execute("SELECT platform_message_id FROM messages WHERE id = ?", (message_id,)).fetchone()
    return None if row is None else row[0]


@dataclass(frozen=True, slots=True)
class MessageRow:
    """A message as transcripts read it.

    Attributes:
        attachments (:obj:`str` | :obj:`None`): A JSON list of files, ``None`` when there are none.
        sort_key (:obj:`float` | :obj:`None`): Its place in the conversation; ``None`` means its id.
    """

    id: int
    role: Role
    sender_name: str | None
    text: str
    attachments: str | None
    sort_key: float | None


_COLUMNS = "id, role, sender_name, text, attachments, sort_key"


def newest_messages(
    conn: sqlite3.Connection, thread_id: int, *, after: int, limit: int, upto_message_id: int | None = None
) -> list[MessageRow]:
    """The thread's newest ``limit`` messages after message ``after``, newest first in
    conversation order.

    User messages after ``upto_message_id`` belong to a later turn and are left out.
    """
    # "+id" keeps the planner on messages_by_thread_order: it walks the newest messages
    # and stops at the LIMIT, instead of sorting the whole thread.
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM messages WHERE thread_id = ? AND +id > ? "
        "AND (role != 'user' OR CAST(? AS BIGINT) IS NULL OR id <= ?) ORDER BY COALESCE(sort_key, id) DESC LIMIT ?",
        (thread_id, after, upto_message_id, upto_message_id, limit),
    ).fetchall()
    return [MessageRow(*row) for row in rows]


def messages_after(conn: sqlite3.Connection, thread_id: int, *, after: int, limit: int) -> list[MessageRow]:
    """The thread's first ``limit`` messages after message ``after``, by id."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM messages WHERE thread_id = ? AND id > ? ORDER BY id LIMIT ?",
        (thread_id, after, limit),
    ).fetchall()
    return [MessageRow(*row) for row in rows]


def set_attachments(conn: sqlite3.Connection, message_id: int, attachments: str | None) -> None:
    """Replace a message's JSON list of files (intake moving them into the thread's workspace)."""
    conn.execute("UPDATE messages SET attachments = ? WHERE id = ?", (attachments, message_id))


@dataclass(frozen=True, slots=True)
class PendingFiles:
    """A message whose files were committed but not yet all moved into its thread's workspace.

    Attributes:
        message_id (:obj:`int`): The message.
        thread_id (:obj:`int`): Its thread.
        persona (:obj:`str`): The persona it was routed to (whose workspace holds the thread's).
        attachments (:obj:`str`): Its JSON list of files.
    """

    message_id: int
    thread_id: int
    persona: str
    attachments: str


def messages_with_staged_files(conn: sqlite3.Connection) -> list[PendingFiles]:
    """Messages with an attachment still marked ``staged`` (read once at start, to finish
    moves a stop or crash interrupted)."""
    # instr() is only a first cut (the caller reads the JSON); a quoted "staged" inside a
    # JSON string value is escaped, so only the key matches.
    rows = conn.execute(
        "SELECT id, thread_id, persona, attachments FROM messages "
        "WHERE attachments IS NOT NULL AND persona IS NOT NULL AND instr(attachments, '\"staged\"') > 0 "
        "ORDER BY id"
    ).fetchall()
    return [PendingFiles(*row) for row in rows]


@dataclass(frozen=True, slots=True)
class BatchSenders:
    """Who sent a batch's user messages."""

    sole: str | None  # the one sender when every message has the same one, else None
    every: tuple[str, ...]  # each distinct sender, the first to write first (none for a batch without)

    @property
    def counted(self) -> str | None:
        """The sender a batch's run is counted for: its one sender, else the first of several."""
        return self.sole or next(iter(self.every), None)


NO_SENDERS = BatchSenders(None, ())


def batch_senders(conn: sqlite3.Connection, message_ids: Sequence[int]) -> BatchSenders:
    """The senders of the user messages ``message_ids``, in one statement."""
    if not message_ids:
        return NO_SENDERS
    marks = ", ".join("?" * len(message_ids))
    ids = [
        row[0]
        for row in conn.execute(
            f"SELECT sender_id FROM messages WHERE id IN ({marks}) AND role = 'user' "
            "GROUP BY sender_id ORDER BY MIN(id)",
            tuple(message_ids),
        ).fetchall()
    ]
    sole = ids[0] if len(ids) == 1 and ids[0] else None
    return BatchSenders(sole, tuple(str(i) for i in ids if i))


def message_sender(conn: sqlite3.Connection, message_id: int) -> str | None:
    """The sender id of message ``message_id`` (``None`` for the gateway's own or unknown)."""
    row = conn.execute("SELECT sender_id FROM messages WHERE id = ?", (message_id,)).fetchone()
    return None if row is None or not row[0] else str(row[0])
