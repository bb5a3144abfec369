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

from gateway.errors import RefusedError

__all__ = [
    "Batch",
    "DeadLetter",
    "LeaseLostError",
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
    "thread_leased",
    "unleased_pending_threads",
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


class LeaseLostError(sqlite3.DatabaseError, RefusedError):
    """A cluster node's lease is no longer its own: it was silent so long that another node
    took the items back. Whatever the turn meant to commit with it is rolled back."""


@dataclass(frozen=True, slots=True)
class Batch:
    """What one turn works on. ``more``: other items of the thread were pending behind it;
    ``node``: the cluster node holding the lease (None on one node)."""

    thread_id: int
    items: tuple[QueueItem, ...]
    more: bool = False
    node: str | None = None

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
    conn: sqlite3.Connection, thread_id: int, lease_seconds: float, now: float, node: str | None = None
) -> Batch | float | None:
    """Lease the thread's next batch until ``now + lease_seconds``, held by ``node`` (in a
    cluster; None on one node).

    Returns the batch; or, when only items not yet due wait, the time the first is due; or
    None when nothing is pending, or when a turn of the thread holds a lease (one turn at a
    time per thread, whichever node runs it; that worker looks again when its turn ends).
    """
    if node is not None and thread_leased(conn, thread_id):
        return None
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
        f"lease_node = ?, updated_at = ? WHERE id IN ({_marks(take)})",
        (now + lease_seconds, node, now, *(r["id"] for r in take)),
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
    return Batch(thread_id, items, more=len(rows) > len(take), node=node)


def _held(ids: Sequence[int], node: str | None) -> tuple[str, tuple[Any, ...]]:
    """The condition (and its values) for the leased items among ``ids`` that ``node`` holds."""
    if node is None:
        return f"id IN ({_marks(ids)}) AND status = 'leased'", tuple(ids)
    return f"id IN ({_marks(ids)}) AND status = 'leased' AND lease_node = ?", (*ids, node)


def complete_items(
    conn: sqlite3.Connection, ids: Sequence[int], run_id: int | None, now: float, node: str | None = None
) -> None:
    """Leased items are done, by ``run_id``.

    Raises:
        LeaseLostError: ``node`` no longer holds them all (the caller's transaction must not commit).
    """
    held, values = _held(ids, node)
    cursor = conn.execute(
        f"UPDATE queue_items SET status = 'done', run_id = ?, updated_at = ? WHERE {held}",
        (run_id, now, *values),
    )
    if node is not None and cursor.rowcount != len(ids):
        raise LeaseLostError(f"node {node} no longer holds the lease of queue items {list(ids)}")


def keep_run(conn: sqlite3.Connection, ids: Sequence[int], run_id: int, node: str | None = None) -> None:
    """Point leased items at the run that kept their answer: their next lease takes exactly
    these items again."""
    held, values = _held(ids, node)
    conn.execute(f"UPDATE queue_items SET run_id = ? WHERE {held}", (run_id, *values))


def release_items(
    conn: sqlite3.Connection,
    ids: Sequence[int],
    *,
    available_at: float,
    error: str | None,
    now: float,
    node: str | None = None,
) -> None:
    """Leased items are pending again, due at ``available_at``; ``error`` (when given) is why."""
    held, values = _held(ids, node)
    conn.execute(
        "UPDATE queue_items SET status = 'pending', lease_expires_at = NULL, lease_node = NULL, available_at = ?, "
        f"last_error = COALESCE(?, last_error), updated_at = ? WHERE {held}",
        (available_at, error, now, *values),
    )


def end_items(
    conn: sqlite3.Connection, ids: Sequence[int], status: str, error: str, now: float, node: str | None = None
) -> None:
    """Leased items end without a reply: ``dead`` (dead-lettered) or ``canceled``."""
    held, values = _held(ids, node)
    conn.execute(
        f"UPDATE queue_items SET status = ?, last_error = ?, updated_at = ? WHERE {held}",
        (status, error, now, *values),
    )


def cancel_pending(conn: sqlite3.Connection, thread_id: int, now: float) -> int:
    """The thread's pending items are ``canceled`` (its task was); returns how many."""
    cursor = conn.execute(
        "UPDATE queue_items SET status = 'canceled', updated_at = ? WHERE thread_id = ? AND status = 'pending'",
        (now, thread_id),
    )
    return cursor.rowcount


def thread_leased(conn: sqlite3.Connection, thread_id: int) -> bool:
    """Whether a turn of the thread holds a lease (on any node)."""
    row = conn.execute(
        "SELECT 1 FROM queue_items WHERE thread_id = ? AND status = 'leased' LIMIT 1", (thread_id,)
    ).fetchone()
    return row is not None


def recover_leases(conn: sqlite3.Connection, max_attempts: int, now: float, node: str | None = None) -> int:
    """At start: leases a stop left are dead-lettered when their attempts are used up and
    released otherwise; in a cluster only ``node``'s own (its previous run's). Returns how
    many were released."""
    held = "" if node is None else " AND lease_node = ?"
    mine = () if node is None else (node,)
    conn.execute(
        "UPDATE queue_items SET status = 'dead', last_error = 'interrupted too many times', "
        f"updated_at = ? WHERE status = 'leased' AND attempts >= ?{held}",
        (now, max_attempts, *mine),
    )
    released = conn.execute(
        "UPDATE queue_items SET status = 'pending', lease_expires_at = NULL, lease_node = NULL, "
        f"updated_at = ? WHERE status = 'leased'{held}",
        (now, *mine),
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


def unleased_pending_threads(conn: sqlite3.Connection) -> list[tuple[int, float]]:
    """:func:`pending_threads` without the threads a turn holds a lease on (their worker
    looks for more when its turn ends): what a cluster node's sweep may start."""
    rows = conn.execute(
        "SELECT thread_id, MIN(available_at) FROM queue_items q WHERE status = 'pending' AND NOT EXISTS "
        "(SELECT 1 FROM queue_items l WHERE l.thread_id = q.thread_id AND l.status = 'leased') "
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
