"""Child agents' tables: ``child_runs``, ``child_jobs``, ``child_steering``, ``child_progress``
and ``compose_nodes``.

A background child is a row of ``background_tasks`` (:mod:`gateway.store.delegation`) plus its
``child_jobs`` row: the narrowed labels and options its turns run with, which survive a
restart with the task. Steering messages wait in ``child_steering`` until the child's next
tool-call boundary takes them; progress events keep the last :data:`PROGRESS_RING` per job.
A compose call's finished nodes are kept by the call's key, so a retried turn reuses them.

Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PROGRESS_RING",
    "ChildJob",
    "NodeRecord",
    "Payer",
    "ProgressEvent",
    "add_progress",
    "add_steering",
    "batch_anchor",
    "child_job",
    "finished_nodes",
    "insert_child_job",
    "job_payer",
    "pending_steering",
    "recent_progress",
    "record_child_run",
    "record_node",
    "set_cancel_reason",
    "set_job_payer",
    "take_steering",
    "thread_payer",
    "touch_job",
]

PROGRESS_RING = 20


@dataclass(frozen=True, slots=True)
class ChildJob:
    """What a background child's turns run with (its task's ``child_jobs`` row)."""

    id: str
    parent_run_id: int | None
    root_run_id: int | None
    depth: int
    labels: tuple[str, ...]
    model: str | None
    system_prompt: str | None
    max_tool_rounds: int
    progress_events: bool
    id_prefix: str | None
    cancel_reason: str | None = None
    last_activity_at: float | None = None
    last_output: str | None = None


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    message: str
    phase: str | None
    metadata: dict[str, Any] | None
    created_at: float


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A finished compose node."""

    node_id: str
    status: str
    output: str
    usage: dict[str, int]


_JOB_COLUMNS = (
    "id, parent_run_id, root_run_id, depth, labels, model, system_prompt, max_tool_rounds, "
    "progress_events, id_prefix, cancel_reason, last_activity_at, last_output"
)


def record_child_run(
    conn: sqlite3.Connection,
    run_id: int,
    *,
    parent_run_id: int | None,
    root_run_id: int | None,
    depth: int,
    kind: str,
) -> None:
    """``run_id`` is a child's run (``kind``: foreground, node or background)."""
    conn.execute(
        "INSERT INTO child_runs (run_id, parent_run_id, root_run_id, depth, kind) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (run_id) DO UPDATE SET parent_run_id = excluded.parent_run_id, "
        "root_run_id = excluded.root_run_id, depth = excluded.depth, kind = excluded.kind",
        (run_id, parent_run_id, root_run_id, depth, kind),
    )


def insert_child_job(conn: sqlite3.Connection, job: ChildJob) -> None:
    """The ``child_jobs`` row of a background task created in the same transaction."""
    conn.execute(
        f"INSERT INTO child_jobs ({_JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            job.id,
            job.parent_run_id,
            job.root_run_id,
            job.depth,
            json.dumps(list(job.labels)),
            job.model,
            job.system_prompt,
            job.max_tool_rounds,
            1 if job.progress_events else 0,
            job.id_prefix,
            job.cancel_reason,
            job.last_activity_at,
            job.last_output,
        ),
    )


def child_job(conn: sqlite3.Connection, job_id: str) -> ChildJob | None:
    row = conn.execute(f"SELECT {_JOB_COLUMNS} FROM child_jobs WHERE id = ?", (job_id,)).fetchone()
    if row is None:
        return None
    values = list(row)
    values[4] = tuple(json.loads(values[4]))
    values[8] = bool(values[8])
    return ChildJob(*values)


def set_cancel_reason(conn: sqlite3.Connection, job_id: str, reason: str) -> None:
    conn.execute("UPDATE child_jobs SET cancel_reason = ? WHERE id = ?", (reason, job_id))


def touch_job(conn: sqlite3.Connection, job_id: str, now: float, output: str | None) -> None:
    """The child reached a boundary at ``now``; ``output`` is its latest text, when it wrote any."""
    conn.execute(
        "UPDATE child_jobs SET last_activity_at = ?, last_output = COALESCE(?, last_output) WHERE id = ?",
        (now, output, job_id),
    )


def add_steering(conn: sqlite3.Connection, job_id: str, message: str, now: float) -> int:
    """Queue a steering message; returns how many are pending now."""
    conn.execute(
        "INSERT INTO child_steering (job_id, message, created_at) VALUES (?, ?, ?)", (job_id, message, now)
    )
    return pending_steering(conn, job_id)


def pending_steering(conn: sqlite3.Connection, job_id: str) -> int:
    row = conn.execute(
        "SELECT COUNT(*) FROM child_steering WHERE job_id = ? AND delivered_at IS NULL", (job_id,)
    ).fetchone()
    return int(row[0])


def take_steering(conn: sqlite3.Connection, job_id: str, now: float) -> list[str]:
    """The pending steering messages, oldest first; they are delivered from now on."""
    rows = conn.execute(
        "SELECT id, message FROM child_steering WHERE job_id = ? AND delivered_at IS NULL ORDER BY id",
        (job_id,),
    ).fetchall()
    if rows:
        conn.execute(
            "UPDATE child_steering SET delivered_at = ? WHERE job_id = ? AND delivered_at IS NULL AND id <= ?",
            (now, job_id, rows[-1][0]),
        )
    return [r[1] for r in rows]


def add_progress(
    conn: sqlite3.Connection,
    job_id: str,
    message: str,
    phase: str | None,
    metadata: dict[str, Any] | None,
    now: float,
) -> None:
    """Keep a progress event; only the last :data:`PROGRESS_RING` of the job stay."""
    conn.execute(
        "INSERT INTO child_progress (job_id, message, phase, metadata, created_at) VALUES (?, ?, ?, ?, ?)",
        (job_id, message, phase, None if metadata is None else json.dumps(metadata), now),
    )
    conn.execute(
        "DELETE FROM child_progress WHERE job_id = ? AND id NOT IN "
        "(SELECT id FROM child_progress WHERE job_id = ? ORDER BY id DESC LIMIT ?)",
        (job_id, job_id, PROGRESS_RING),
    )
    touch_job(conn, job_id, now, None)


def recent_progress(conn: sqlite3.Connection, job_id: str) -> list[ProgressEvent]:
    """The job's kept progress events, oldest first."""
    rows = conn.execute(
        "SELECT message, phase, metadata, created_at FROM child_progress WHERE job_id = ? ORDER BY id",
        (job_id,),
    ).fetchall()
    return [ProgressEvent(r[0], r[1], None if r[2] is None else json.loads(r[2]), r[3]) for r in rows]


def batch_anchor(conn: sqlite3.Connection, thread_id: int) -> int | None:
    """The first queue item of the batch a turn of ``thread_id`` is working on (its leased
    items), or ``None`` when none is leased (an ad-hoc session). A retry after a crash leases
    the same items again, so this stays the same across the retries of one batch."""
    row = conn.execute(
        "SELECT MIN(id) FROM queue_items WHERE thread_id = ? AND status = 'leased'", (thread_id,)
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def record_node(
    conn: sqlite3.Connection, compose_key: str, node_id: str, output: str, usage: dict[str, int], now: float
) -> None:
    """A compose node finished; its output is reused by a retry of the same call."""
    conn.execute(
        "INSERT INTO compose_nodes (compose_key, node_id, status, output, usage, finished_at) "
        "VALUES (?, ?, 'completed', ?, ?, ?) ON CONFLICT (compose_key, node_id) DO UPDATE SET "
        "status = excluded.status, output = excluded.output, usage = excluded.usage, "
        "finished_at = excluded.finished_at",
        (compose_key, node_id, output, json.dumps(usage), now),
    )


def finished_nodes(conn: sqlite3.Connection, compose_key: str) -> dict[str, NodeRecord]:
    """The nodes of the call ``compose_key`` that finished, by node id."""
    rows = conn.execute(
        "SELECT node_id, status, output, usage FROM compose_nodes WHERE compose_key = ?", (compose_key,)
    ).fetchall()
    return {r[0]: NodeRecord(r[0], r[1], r[2], json.loads(r[3])) for r in rows}


@dataclass(frozen=True, slots=True)
class Payer:
    """Whom a run's usage counts for: the persona, channel and sender of the root turn."""

    persona: str | None
    channel: str | None
    sender: str | None

    @property
    def senders(self) -> tuple[str, ...]:
        return (self.sender,) if self.sender else ()


def job_payer(conn: sqlite3.Connection, thread_id: int) -> Payer | None:
    """The payer a background child's job keeps for its thread, or ``None`` (not a child's)."""
    kept = conn.execute(
        "SELECT j.payer FROM background_tasks b JOIN child_jobs j ON j.id = b.id "
        "WHERE b.thread_id = ? AND j.payer IS NOT NULL",
        (thread_id,),
    ).fetchone()
    if kept is None:
        return None
    data = json.loads(kept["payer"])
    return Payer(data.get("persona"), data.get("channel"), data.get("sender"))


def thread_payer(conn: sqlite3.Connection, thread_id: int, sender: str | None) -> Payer:
    """Who pays for a run working for ``thread_id``: the payer a background child's job keeps,
    else the thread's persona and channel with ``sender``."""
    kept = job_payer(conn, thread_id)
    if kept is not None:
        return kept
    row = conn.execute("SELECT persona, channel FROM threads WHERE id = ?", (thread_id,)).fetchone()
    if row is None:
        return Payer(None, None, sender)
    return Payer(row["persona"], row["channel"], sender)


def set_job_payer(conn: sqlite3.Connection, job_id: str, payer: Payer) -> None:
    conn.execute(
        "UPDATE child_jobs SET payer = ? WHERE id = ?",
        (json.dumps({"persona": payer.persona, "channel": payer.channel, "sender": payer.sender}), job_id),
    )
