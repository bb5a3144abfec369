"""The ``stream_previews`` table: the in-progress messages of streamed replies.

A preview is ``open`` while its turn writes, ``final`` once the reply's first outbox row is
committed to replace it by an edit, and ``closed`` once it was deleted or marked as
interrupted. An ``open`` preview whose turn is no longer running is stale (a crash, a failed
turn): the next turn of its thread, or the daemon's start, settles it.

Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from connectors.base import ThreadKey
from gateway.store.threads import key_of, topic_value

__all__ = ["PreviewRow", "add_preview", "close_preview", "finalize_preview", "open_previews", "posted_since"]


@dataclass(frozen=True, slots=True)
class PreviewRow:
    id: int
    run_id: int | None
    thread_id: int
    channel: str
    chat_id: str
    topic: str
    platform_message_id: str

    @property
    def key(self) -> ThreadKey:
        return key_of(self.channel, self.chat_id, self.topic)


_COLUMNS = "id, run_id, thread_id, channel, chat_id, topic, platform_message_id"


def add_preview(
    conn: sqlite3.Connection,
    *,
    run_id: int | None,
    thread_id: int,
    key: ThreadKey,
    platform_message_id: str,
    now: float,
) -> int:
    """Record a preview that now exists on the platform; returns its row id."""
    (row_id,) = conn.execute(
        "INSERT INTO stream_previews (run_id, thread_id, channel, chat_id, topic, platform_message_id, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (run_id, thread_id, key.channel, key.chat_id, topic_value(key), platform_message_id, now),
    ).fetchone()
    return int(row_id)


def open_previews(conn: sqlite3.Connection, thread_id: int | None = None) -> list[PreviewRow]:
    """Open previews, of one thread or of all, oldest first."""
    if thread_id is None:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM stream_previews WHERE state = 'open' ORDER BY id"
        ).fetchall()
    else:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM stream_previews WHERE state = 'open' AND thread_id = ? ORDER BY id",
            (thread_id,),
        ).fetchall()
    return [PreviewRow(*row) for row in rows]


def finalize_preview(conn: sqlite3.Connection, preview_id: int, now: float) -> bool:
    """The reply that replaces the preview is committed (in this same transaction). False
    when the preview was no longer open (another start settled it)."""
    cursor = conn.execute(
        "UPDATE stream_previews SET state = 'final', closed_at = ? WHERE id = ? AND state = 'open'",
        (now, preview_id),
    )
    return cursor.rowcount == 1


def close_preview(conn: sqlite3.Connection, preview_id: int, now: float) -> None:
    """The preview was deleted or marked as interrupted: nothing is left to settle."""
    conn.execute(
        "UPDATE stream_previews SET state = 'closed', closed_at = ? WHERE id = ? AND state = 'open'",
        (now, preview_id),
    )


def posted_since(conn: sqlite3.Connection, thread_id: int, since: float) -> bool:
    """Whether the thread's chat got (or is about to get) a message at or after ``since``: an
    outbox row delivered or created since then, or one still waiting, or a question or
    approval prompt asked since then. Rows that edit or remove a message already there
    (``edit_of``) post nothing new. A thread delivers its rows in id order, so its newest row
    that posts something is the one to look at."""
    row = conn.execute(
        "SELECT status, created_at, sent_at FROM outbox WHERE thread_id = ? AND edit_of IS NULL "
        "AND status != 'failed' ORDER BY id DESC LIMIT 1",
        (thread_id,),
    ).fetchone()
    if row is not None:
        status, created_at, sent_at = row
        if status in ("pending", "sending") or created_at >= since or (sent_at or 0.0) >= since:
            return True
    asked = conn.execute(
        "SELECT 1 FROM interactions WHERE thread_id = ? AND created_at >= ? LIMIT 1", (thread_id, since)
    ).fetchone()
    return asked is not None
