"""The ``queue_items`` table: the durable per-thread FIFO of work for agent turns.

An item is ``pending`` (due at ``available_at``), ``leased`` while a turn works on it (the
lease counts an attempt), then ``done``, ``dead`` (dead-lettered) or ``canceled``. Items are
leased in batches: every pending ``message`` item of a thread that is due together, any
other kind alone.

Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Batch",
    "DeadLetter",
    "QueueItem",
    "cancel_pending",
    "complete_items",
    "count_by_status",
    "dead_letters",
    "defer_open_albums",
    "drop_dead_letter",
    "end_items",
    "enqueue_message",
    "enqueue_task",
    "first_open_message",
    "keep_run",
    "lease_batch",
    "pending_threads",
    "recover_leases",
    "release_items",
    "retry_dead_letter",
    "take_deferred_along",
    "waiting_message",
]


@dataclass(frozen=True, slots=True)
class QueueItem:
    id: int
    kind: str
    message_id: int | None
    payload: dict[str, Any]
    attempts: int
    run_id: int | None = None  # while pending: the run that kept its answer (see keep_run)


@dataclass(frozen=True, slots=True)
class Batch:
    """What one turn works on. ``more``: other items of the thread were pending behind it."""

    thread_id: int
    items: tuple[QueueItem, ...]
    more: bool = False

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(i.id for i in self.items)

    @property
    def message_ids(self) -> tuple[int, ...]:
        return tuple(i.message_id for i in self.items if i.message_id is not None)

    @property
    def attempts(self) -> int:
        return max(i.attempts for i in self.items)

    @property
    def kept_run(self) -> int | None:
        """The run holding this batch's answer from an earlier attempt, if one does."""
        return self.items[0].run_id


def _marks(ids: Sequence[int]) -> str:
    return ",".join("?" * len(ids))


def enqueue_message(
    conn: sqlite3.Connection, thread_id: int, message_id: int, *, available_at: float, now: float
) -> int:
    """Work for the thread's persona on a stored message, due at ``available_at``; returns its id."""
    (item_id,) = conn.execute(
        "INSERT INTO queue_items (thread_id, kind, message_id, available_at, created_at, updated_at) "
        "VALUES (?, 'message', ?, ?, ?, ?) RETURNING id",
        (thread_id, message_id, available_at, now, now),
    ).fetchone()
    return int(item_id)


def enqueue_task(
    conn: sqlite3.Connection, thread_id: int, kind: str, payload: dict[str, Any], *, now: float
) -> int:
    """Work of another ``kind`` (a scheduled prompt, say), due now; returns its id."""
    (item_id,) = conn.execute(
        "INSERT INTO queue_items (thread_id, kind, payload, status, available_at, created_at, updated_at) "
        "VALUES (?, ?, ?, 'pending', ?, ?, ?) RETURNING id",
        (thread_id, kind, json.dumps(payload, ensure_ascii=False), now, now, now),
    ).fetchone()
    return int(item_id)


def defer_open_albums(conn: sqlite3.Connection, until: float, now: float) -> list[tuple[int, str, str, str]]:
    """Make the pending messages of albums due no earlier than ``until`` (at start, so that
    the rest of an album cut by a crash, redelivered by the platform, joins their turn).

    Returns (thread_id, channel, chat_id, album) of each such album.
    """
    rows = conn.execute(
        "SELECT q.id, t.id, t.channel, t.chat_id, m.album FROM queue_items q "
        "JOIN messages m ON m.id = q.message_id JOIN threads t ON t.id = q.thread_id "
        "WHERE q.status = 'pending' AND q.kind = 'message' AND m.album IS NOT NULL"
    ).fetchall()
    ids = [r[0] for r in rows]
    if ids:
        conn.execute(
            "UPDATE queue_items SET available_at = CASE WHEN available_at > ? THEN available_at ELSE ? END, "
            f"updated_at = ? WHERE id IN ({_marks(ids)})",
            (until, until, now, *ids),
        )
    return sorted({(r[1], r[2], r[3], r[4]) for r in rows})


def take_deferred_along(conn: sqlite3.Connection, thread_id: int, now: float) -> None:
    """Messages of the thread deferred by the intake rate become due now, to join the turn a
    message due now starts. Retries waiting out a backoff (leased before) keep their time."""
    conn.execute(
        "UPDATE queue_items SET available_at = ?, updated_at = ? WHERE thread_id = ? "
        "AND status = 'pending' AND kind = 'message' AND attempts = 0 AND available_at > ?",
        (now, now, thread_id, now),
    )


def lease_batch(
    conn: sqlite3.Connection, thread_id: int, lease_seconds: float, now: float
) -> Batch | float | None:
    """Lease the thread's next batch until ``now + lease_seconds``.

    Returns the batch; or, when only items not yet due wait, the time the first is due; or
    None when nothing is pending.
    """
    rows = conn.execute(
        "SELECT id, kind, message_id, payload, attempts, available_at, run_id FROM queue_items "
        "WHERE thread_id = ? AND status = 'pending' ORDER BY id",
        (thread_id,),
    ).fetchall()
    if not rows:
        return None
    if rows[0]["available_at"] > now:
        return float(rows[0]["available_at"])  # FIFO: a retry waiting for its backoff goes first
    # Consecutive message items form one turn; any other kind runs alone. A batch whose
    # answer was kept runs again as it was: messages that came since wait for the next turn.
    take = [rows[0]]
    if rows[0]["kind"] == "message":
        for row in rows[1:]:
            if row["kind"] != "message" or row["available_at"] > now or row["run_id"] != rows[0]["run_id"]:
                break
            take.append(row)
    conn.execute(
        f"UPDATE queue_items SET status = 'leased', attempts = attempts + 1, lease_expires_at = ?, "
        f"updated_at = ? WHERE id IN ({_marks(take)})",
        (now + lease_seconds, now, *(r["id"] for r in take)),
    )
    items = tuple(
        QueueItem(
            r["id"],
            r["kind"],
            r["message_id"],
            json.loads(r["payload"] or "{}"),
            r["attempts"] + 1,
            r["run_id"],
        )
        for r in take
    )
    return Batch(thread_id, items, more=len(rows) > len(take))


def complete_items(conn: sqlite3.Connection, ids: Sequence[int], run_id: int | None, now: float) -> None:
    """Leased items are done, by ``run_id``."""
    conn.execute(
        f"UPDATE queue_items SET status = 'done', run_id = ?, updated_at = ? WHERE id IN ({_marks(ids)}) "
        "AND status = 'leased'",
        (run_id, now, *ids),
    )


def keep_run(conn: sqlite3.Connection, ids: Sequence[int], run_id: int) -> None:
    """Point leased items at the run that kept their answer: their next lease takes exactly
    these items again."""
    conn.execute(
        f"UPDATE queue_items SET run_id = ? WHERE id IN ({_marks(ids)}) AND status = 'leased'",
        (run_id, *ids),
    )


def release_items(
    conn: sqlite3.Connection, ids: Sequence[int], *, available_at: float, error: str | None, now: float
) -> None:
    """Leased items are pending again, due at ``available_at``; ``error`` (when given) is why."""
    conn.execute(
        f"UPDATE queue_items SET status = 'pending', lease_expires_at = NULL, available_at = ?, "
        f"last_error = COALESCE(?, last_error), updated_at = ? WHERE id IN ({_marks(ids)}) AND status = 'leased'",
        (available_at, error, now, *ids),
    )


def end_items(conn: sqlite3.Connection, ids: Sequence[int], status: str, error: str, now: float) -> None:
    """Leased items end without a reply: ``dead`` (dead-lettered) or ``canceled``."""
    conn.execute(
        f"UPDATE queue_items SET status = ?, last_error = ?, updated_at = ? WHERE id IN ({_marks(ids)}) "
        "AND status = 'leased'",
        (status, error, now, *ids),
    )


def cancel_pending(conn: sqlite3.Connection, thread_id: int, now: float) -> int:
    """The thread's pending items are ``canceled`` (its task was); returns how many."""
    cursor = conn.execute(
        "UPDATE queue_items SET status = 'canceled', updated_at = ? WHERE thread_id = ? AND status = 'pending'",
        (now, thread_id),
    )
    return cursor.rowcount


def recover_leases(conn: sqlite3.Connection, max_attempts: int, now: float) -> int:
    """At start: leases a stop left are dead-lettered when their attempts are used up and
    released otherwise. Returns how many were released."""
    conn.execute(
        "UPDATE queue_items SET status = 'dead', last_error = 'interrupted too many times', "
        "updated_at = ? WHERE status = 'leased' AND attempts >= ?",
        (now, max_attempts),
    )
    released = conn.execute(
        "UPDATE queue_items SET status = 'pending', lease_expires_at = NULL, updated_at = ? "
        "WHERE status = 'leased'",
        (now,),
    )
    return released.rowcount


def pending_threads(conn: sqlite3.Connection) -> list[tuple[int, float]]:
    """(thread id, when its first pending item is due) for every thread with pending work,
    the thread with the oldest item first."""
    rows = conn.execute(
        "SELECT thread_id, MIN(available_at) FROM queue_items WHERE status = 'pending' "
        "GROUP BY thread_id ORDER BY MIN(id)"
    ).fetchall()
    return [(row[0], row[1]) for row in rows]


def first_open_message(conn: sqlite3.Connection, thread_id: int) -> int | None:
    """The oldest message of the thread still waiting for (or in) a turn."""
    row = conn.execute(
        "SELECT MIN(message_id) FROM queue_items WHERE thread_id = ? "
        "AND status IN ('pending', 'leased') AND message_id IS NOT NULL",
        (thread_id,),
    ).fetchone()
    return None if row is None else row[0]


def waiting_message(conn: sqlite3.Connection, thread_id: int) -> bool:
    """Whether a message of the thread waits for its turn (one came while a turn runs)."""
    row = conn.execute(
        "SELECT 1 FROM queue_items WHERE thread_id = ? AND status = 'pending' AND kind = 'message' LIMIT 1",
        (thread_id,),
    ).fetchone()
    return row is not None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A dead-lettered item, where it came from and why it died."""

    id: int
    thread_id: int
    kind: str
    attempts: int
    last_error: str | None
    updated_at: float
    channel: str
    chat_id: str


def dead_letters(conn: sqlite3.Connection, limit: int) -> list[DeadLetter]:
    """The ``limit`` most recently dead-lettered items."""
    rows = conn.execute(
        "SELECT q.id, q.thread_id, q.kind, q.attempts, q.last_error, q.updated_at, t.channel, t.chat_id "
        "FROM queue_items q JOIN threads t ON t.id = q.thread_id WHERE q.status = 'dead' "
        "ORDER BY q.updated_at DESC LIMIT ?",
        (limit,),
    ).fetchall()
    return [DeadLetter(*row) for row in rows]


def retry_dead_letter(conn: sqlite3.Connection, item_id: int, now: float) -> int | None:
    """A dead-lettered item is pending again with fresh attempts, due now; returns its
    thread id, or None when no dead letter has that id."""
    row = conn.execute(
        "UPDATE queue_items SET status = 'pending', attempts = 0, lease_expires_at = NULL, "
        "available_at = ?, updated_at = ? WHERE id = ? AND status = 'dead' RETURNING thread_id",
        (now, now, item_id),
    ).fetchone()
    return None if row is None else int(row[0])


def drop_dead_letter(conn: sqlite3.Connection, item_id: int, now: float) -> bool:
    """A dead-lettered item is given up for good (``canceled``, its error kept); False when no
    dead letter has that id."""
    cur = conn.execute(
        "UPDATE queue_items SET status = 'canceled', last_error = 'dropped: ' || COALESCE(last_error, ''), "
        "updated_at = ? WHERE id = ? AND status = 'dead'",
        (now, item_id),
    )
    return cur.rowcount == 1


def count_by_status(conn: sqlite3.Connection) -> dict[str, int]:
    """How many items are pending, leased and dead (statuses without items are left out)."""
    rows = conn.execute(
        "SELECT status, COUNT(*) FROM queue_items WHERE status IN ('pending', 'leased', 'dead') GROUP BY status"
    ).fetchall()
    return {row[0]: row[1] for row in rows}
