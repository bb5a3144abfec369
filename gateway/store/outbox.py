"""The ``outbox`` table: one row per rendered chunk or file, delivered in order per thread.

A row is ``pending`` until it is due (``available_at``), ``sending`` while a platform call
that must not be repeated blindly is in flight, then ``sent``, ``failed`` or ``unknown``
(the platform may or may not have it).

Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass

from connectors.base import RenderedChunk, ThreadKey
from gateway.store.threads import key_of, topic_value

__all__ = [
    "DROP_PREVIEW",
    "OutboxFile",
    "OutboxRow",
    "ThreadAddress",
    "claim_next",
    "claim_thread",
    "claimed_threads",
    "count_by_status",
    "drop_claims",
    "enqueue_chunks",
    "enqueue_drop",
    "enqueue_files",
    "finish_row",
    "interrupted_rows",
    "mark_sending",
    "next_pending",
    "open_file_paths",
    "release_thread",
    "retry_row",
    "settle_interrupted",
    "threads_with_pending",
    "unclaimed_pending_threads",
]


DROP_PREVIEW = "drop_preview"
"""The ``format`` of a row that removes a superseded streamed preview (``edit_of``) once the
reply sent fresh below it is delivered: it deletes the preview, or edits it to the row's text
where deletion is refused. Both are idempotent, so such a row is retried after a crash."""


@dataclass(frozen=True, slots=True)
class ThreadAddress:
    """Where a thread's output goes: its row id and platform key."""

    thread_id: int
    key: ThreadKey


@dataclass(frozen=True, slots=True)
class OutboxFile:
    """A file row's payload: the spooled copy to upload and what the chat is shown."""

    path: str
    name: str
    size: int
    sha256: str
    mime_type: str | None = None

    @property
    def label(self) -> str:
        """The row's text: what a transcript or the console shows for the file."""
        return f"[file {self.name}, {self.size} bytes]"


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """One chunk or file to deliver, and how far its delivery got."""

    id: int
    thread_id: int
    channel: str
    chat_id: str
    topic: str
    seq: int
    format: str
    text: str
    plain: str
    reply_to: str | None
    status: str
    attempts: int
    available_at: float
    file_path: str | None = None
    file_name: str | None = None
    file_size: int | None = None
    file_sha256: str | None = None
    file_mime: str | None = None
    edit_of: str | None = None  # the platform message (a streamed preview) this chunk replaces by an edit
    run_id: int | None = None  # the run whose reply (or notice) this is; None for posts of no run

    @property
    def key(self) -> ThreadKey:
        return key_of(self.channel, self.chat_id, self.topic)

    @property
    def drops_preview(self) -> bool:
        """The row removes the preview ``edit_of`` instead of delivering anything."""
        return self.format == DROP_PREVIEW

    @property
    def file(self) -> OutboxFile | None:
        """The file this row delivers; ``None`` for a text chunk."""
        if self.file_path is None:
            return None
        return OutboxFile(
            self.file_path,
            self.file_name or "file",
            self.file_size or 0,
            self.file_sha256 or "",
            self.file_mime,
        )


_COLUMNS = (
    "id, thread_id, channel, chat_id, topic, seq, format, text, plain, reply_to, status, attempts, available_at, "
    "file_path, file_name, file_size, file_sha256, file_mime, edit_of, run_id"
)


def enqueue_chunks(
    conn: sqlite3.Connection,
    address: ThreadAddress,
    chunks: Sequence[RenderedChunk],
    *,
    run_id: int | None = None,
    message_id: int | None = None,
    reply_to: str | None = None,
    edit_of: str | None = None,
    first_seq: int = 0,
) -> list[int]:
    """One row per chunk, due now, after the message's ``first_seq`` rows, in the caller's
    transaction; returns their ids. Only the first chunk quotes ``reply_to``; with ``edit_of``
    the first chunk is delivered by editing that platform message (a streamed preview) instead
    of posting."""
    now = time.time()
    ids = []
    for seq, chunk in enumerate(chunks, start=first_seq):
        first = seq == first_seq
        (row_id,) = conn.execute(
            "INSERT INTO outbox (thread_id, run_id, message_id, channel, chat_id, topic, seq, format, "
            "text, plain, reply_to, available_at, created_at, edit_of) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                address.thread_id,
                run_id,
                message_id,
                address.key.channel,
                address.key.chat_id,
                topic_value(address.key),
                seq,
                chunk.format,
                chunk.text,
                chunk.plain,
                reply_to if first else None,
                now,
                now,
                edit_of if first else None,
            ),
        ).fetchone()
        ids.append(int(row_id))
    return ids


def enqueue_files(
    conn: sqlite3.Connection,
    address: ThreadAddress,
    files: Sequence[OutboxFile],
    *,
    run_id: int | None = None,
    message_id: int | None = None,
    first_seq: int = 0,
) -> list[int]:
    """One row per file, due now, after the message's ``first_seq`` chunks; returns their ids."""
    now = time.time()
    ids = []
    for seq, file in enumerate(files, start=first_seq):
        (row_id,) = conn.execute(
            "INSERT INTO outbox (thread_id, run_id, message_id, channel, chat_id, topic, seq, format, "
            "text, plain, available_at, created_at, file_path, file_name, file_size, file_sha256, file_mime) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'file', ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                address.thread_id,
                run_id,
                message_id,
                address.key.channel,
                address.key.chat_id,
                topic_value(address.key),
                seq,
                file.label,
                file.label,
                now,
                now,
                file.path,
                file.name,
                file.size,
                file.sha256,
                file.mime_type,
            ),
        ).fetchone()
        ids.append(int(row_id))
    return ids


def enqueue_drop(
    conn: sqlite3.Connection,
    address: ThreadAddress,
    preview_message_id: str,
    *,
    mark: str,
    seq: int,
    run_id: int | None = None,
    message_id: int | None = None,
) -> int:
    """A row, due now, that removes the preview ``preview_message_id`` once the rows before it
    in the thread are delivered (``mark`` is shown instead where it cannot be deleted)."""
    drop = RenderedChunk(mark, mark, DROP_PREVIEW)
    [row_id] = enqueue_chunks(
        conn,
        address,
        [drop],
        run_id=run_id,
        message_id=message_id,
        edit_of=preview_message_id,
        first_seq=seq,
    )
    return row_id


def open_file_paths(conn: sqlite3.Connection) -> set[str]:
    """The spooled copies still needed: those of file rows ``pending`` or ``sending``."""
    rows = conn.execute(
        "SELECT file_path FROM outbox WHERE file_path IS NOT NULL AND status IN ('pending', 'sending')"
    ).fetchall()
    return {str(row[0]) for row in rows}


def next_pending(conn: sqlite3.Connection, thread_id: int) -> OutboxRow | None:
    """The thread's next row to send (whether due yet or not)."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM outbox WHERE thread_id = ? AND status = 'pending' ORDER BY id LIMIT 1",
        (thread_id,),
    ).fetchone()
    return None if row is None else OutboxRow(*row)


def mark_sending(conn: sqlite3.Connection, row_id: int, node: str | None = None) -> bool:
    """The row's platform call is about to start: after a crash it is not resent blindly.

    In a cluster, only while ``node`` holds the thread's claim: False when it no longer does
    (it was silent so long that another node took the thread over), and the row is left alone.
    """
    if node is None:
        conn.execute("UPDATE outbox SET status = 'sending' WHERE id = ?", (row_id,))
        return True
    cursor = conn.execute(
        "UPDATE outbox SET status = 'sending' WHERE id = ? AND status = 'pending' AND EXISTS "
        "(SELECT 1 FROM outbox_claims c WHERE c.thread_id = outbox.thread_id AND c.node_id = ?)",
        (row_id, node),
    )
    return cursor.rowcount == 1


def retry_row(conn: sqlite3.Connection, row_id: int, *, available_at: float, error: str | None) -> None:
    """A failed attempt: the row is pending again, due at ``available_at``."""
    conn.execute(
        "UPDATE outbox SET status = 'pending', attempts = attempts + 1, available_at = ?, error = ? WHERE id = ?",
        (available_at, error, row_id),
    )


def finish_row(
    conn: sqlite3.Connection,
    row_id: int,
    status: str,
    *,
    platform_message_id: str | None,
    error: str | None,
    now: float,
) -> None:
    """The row's delivery ended: ``sent`` (with the platform's id), ``failed`` or ``unknown``."""
    conn.execute(
        "UPDATE outbox SET status = ?, attempts = attempts + 1, platform_message_id = ?, error = ?, "
        "sent_at = ? WHERE id = ?",
        (status, platform_message_id, error, now, row_id),
    )


def interrupted_rows(conn: sqlite3.Connection, thread_ids: Sequence[int] | None = None) -> list[OutboxRow]:
    """Rows a stop left in ``sending`` (of ``thread_ids`` only, when given)."""
    if thread_ids is None:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM outbox WHERE status = 'sending' ORDER BY id").fetchall()
    elif not thread_ids:
        rows = []
    else:
        marks = ",".join("?" * len(thread_ids))
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM outbox WHERE status = 'sending' AND thread_id IN ({marks}) ORDER BY id",
            tuple(thread_ids),
        ).fetchall()
    return [OutboxRow(*row) for row in rows]


def settle_interrupted(conn: sqlite3.Connection, row_id: int, *, resend: bool, error: str | None) -> None:
    """An interrupted row is ``pending`` again when resending is safe, else ``unknown`` with ``error``."""
    conn.execute(
        "UPDATE outbox SET status = ?, error = ? WHERE id = ?",
        ("pending" if resend else "unknown", None if resend else error, row_id),
    )


def claim_thread(conn: sqlite3.Connection, thread_id: int, node: str, until: float, now: float) -> bool:
    """``node`` takes (or keeps) the right to send the thread's rows, until ``until``; False
    when another node holds it. Only the holder sends, so a thread's rows go out in order."""
    row = conn.execute(
        "INSERT INTO outbox_claims (thread_id, node_id, expires_at) VALUES (?, ?, ?) "
        "ON CONFLICT (thread_id) DO UPDATE SET node_id = excluded.node_id, expires_at = excluded.expires_at "
        "WHERE outbox_claims.node_id = excluded.node_id OR outbox_claims.expires_at < ? RETURNING node_id",
        (thread_id, node, until, now),
    ).fetchone()
    return row is not None


def claim_next(
    conn: sqlite3.Connection, thread_id: int, node: str, until: float, now: float
) -> OutboxRow | None:
    """The thread's next row for ``node`` to send, with the thread's claim taken; None when
    another node holds the claim or nothing is pending (then no claim is kept)."""
    if not claim_thread(conn, thread_id, node, until, now):
        return None
    return release_thread(conn, thread_id, node)


def unclaimed_pending_threads(conn: sqlite3.Connection) -> list[int]:
    """Threads with rows to send that no node has claimed: what a cluster node's sweep starts."""
    rows = conn.execute(
        "SELECT DISTINCT thread_id FROM outbox o WHERE status = 'pending' AND NOT EXISTS "
        "(SELECT 1 FROM outbox_claims c WHERE c.thread_id = o.thread_id) ORDER BY thread_id"
    ).fetchall()
    return [row[0] for row in rows]


def release_thread(conn: sqlite3.Connection, thread_id: int, node: str) -> OutboxRow | None:
    """``node`` lets go of the thread when it has nothing left to send; returns the thread's
    next pending row instead (the claim kept) when rows came meanwhile, so none is left
    without a sender."""
    following = next_pending(conn, thread_id)
    if following is None:
        conn.execute("DELETE FROM outbox_claims WHERE thread_id = ? AND node_id = ?", (thread_id, node))
    return following


def claimed_threads(conn: sqlite3.Connection, nodes: Sequence[str]) -> list[int]:
    """The threads whose rows ``nodes`` hold the right to send."""
    if not nodes:
        return []
    marks = ",".join("?" * len(nodes))
    rows = conn.execute(
        f"SELECT thread_id FROM outbox_claims WHERE node_id IN ({marks}) ORDER BY thread_id", tuple(nodes)
    ).fetchall()
    return [row[0] for row in rows]


def drop_claims(conn: sqlite3.Connection, thread_ids: Sequence[int]) -> None:
    """The claims on ``thread_ids`` end (their node is gone and its rows were settled)."""
    if thread_ids:
        marks = ",".join("?" * len(thread_ids))
        conn.execute(f"DELETE FROM outbox_claims WHERE thread_id IN ({marks})", tuple(thread_ids))


def threads_with_pending(conn: sqlite3.Connection) -> list[int]:
    """The threads that have rows to send."""
    return [row[0] for row in conn.execute("SELECT DISTINCT thread_id FROM outbox WHERE status = 'pending'")]


def count_by_status(conn: sqlite3.Connection) -> dict[str, int]:
    """How many rows are pending, sending, failed and unknown (statuses without rows are left out)."""
    rows = conn.execute(
        "SELECT status, COUNT(*) FROM outbox WHERE status IN ('pending', 'sending', 'failed', 'unknown') "
        "GROUP BY status"
    ).fetchall()
    return {row[0]: row[1] for row in rows}
