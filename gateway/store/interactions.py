"""Pending interactions (migration 0016): questions and approvals a human answers with a tap or
a reply, the approvals a thread keeps, and the checkpoints of runs suspended on them.

An interaction is ``pending`` until exactly one answer is recorded (:func:`answer_interaction`
refuses every later one) or it expires. A run that asks is suspended at a checkpoint
(:func:`save_checkpoint`): its transcript so far and the tool calls still to run, so that the
batch leased again after a restart resumes the run instead of calling the model again.
Every function runs on the database thread, inside ``Database.run_transaction`` or ``Database.read``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.store.queue import keep_run

__all__ = [
    "InteractionRow",
    "NewInteraction",
    "add_approval_rule",
    "answer_interaction",
    "claim_post",
    "create_interaction",
    "drop_checkpoints",
    "expire_interaction",
    "get_interaction",
    "has_approval_rule",
    "load_checkpoint",
    "pending_interactions",
    "save_checkpoint",
    "set_platform_message",
    "set_post_unknown",
    "settle_interrupted_posts",
    "toggle_selection",
]

_COLUMNS = (
    "id, thread_id, run_id, call_id, kind, spec, answerers, expires_at, state, answer, answered_by, "
    "platform_message_id, created_at, answered_at, post_state, selection"
)


@dataclass(frozen=True, slots=True)
class NewInteraction:
    id: str
    thread_id: int
    run_id: int | None
    call_id: str | None
    kind: str  # question | approval
    spec: dict[str, Any]
    answerers: tuple[str, ...] | None  # None: anyone in the chat
    expires_at: float


@dataclass(frozen=True, slots=True)
class InteractionRow:
    id: str
    thread_id: int
    run_id: int | None
    call_id: str | None
    kind: str
    spec: dict[str, Any]
    answerers: tuple[str, ...] | None
    expires_at: float
    state: str
    answer: Any
    answered_by: str | None
    platform_message_id: str | None
    created_at: float
    answered_at: float | None
    post_state: str | None = None  # None (not posted) | sending | sent | unknown
    selection: tuple[str, ...] = ()  # options toggled on (toggle buttons), in option order


def _row(row: sqlite3.Row) -> InteractionRow:
    answerers = json.loads(row["answerers"]) if row["answerers"] is not None else None
    return InteractionRow(
        id=row["id"],
        thread_id=row["thread_id"],
        run_id=row["run_id"],
        call_id=row["call_id"],
        kind=row["kind"],
        spec=json.loads(row["spec"]),
        answerers=tuple(answerers) if answerers is not None else None,
        expires_at=row["expires_at"],
        state=row["state"],
        answer=json.loads(row["answer"]) if row["answer"] is not None else None,
        answered_by=row["answered_by"],
        platform_message_id=row["platform_message_id"],
        created_at=row["created_at"],
        answered_at=row["answered_at"],
        post_state=row["post_state"],
        selection=tuple(json.loads(row["selection"])) if row["selection"] else (),
    )


def create_interaction(
    conn: sqlite3.Connection, new: NewInteraction, now: float
) -> tuple[InteractionRow, bool]:
    """The interaction of ``new``'s tool call: the one already recorded for that call (a resumed
    run asks again), else a new one. The flag says whether it was created now."""
    if new.run_id is not None and new.call_id is not None:
        earlier = conn.execute(
            f"SELECT {_COLUMNS} FROM interactions WHERE run_id = ? AND call_id = ?", (new.run_id, new.call_id)
        ).fetchone()
        if earlier is not None:
            return _row(earlier), False
    answerers = json.dumps(list(new.answerers)) if new.answerers is not None else None
    row = conn.execute(
        "INSERT INTO interactions (id, thread_id, run_id, call_id, kind, spec, answerers, expires_at, created_at) "
        f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {_COLUMNS}",
        (
            new.id,
            new.thread_id,
            new.run_id,
            new.call_id,
            new.kind,
            json.dumps(new.spec, ensure_ascii=False),
            answerers,
            new.expires_at,
            now,
        ),
    ).fetchone()
    return _row(row), True


def get_interaction(conn: sqlite3.Connection, interaction_id: str) -> InteractionRow | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM interactions WHERE id = ?", (interaction_id,)).fetchone()
    return _row(row) if row is not None else None


def pending_interactions(conn: sqlite3.Connection) -> list[InteractionRow]:
    """Every interaction still waiting for its answer, oldest first."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM interactions WHERE state = 'pending' ORDER BY created_at, id"
    ).fetchall()
    return [_row(r) for r in rows]


def claim_post(conn: sqlite3.Connection, interaction_id: str) -> bool:
    """Mark the prompt ``sending`` before the platform call; False when it was posted, or its
    posting begun, before (by this run before a crash): it is then never posted again."""
    cursor = conn.execute(
        "UPDATE interactions SET post_state = 'sending' WHERE id = ? AND post_state IS NULL",
        (interaction_id,),
    )
    return cursor.rowcount == 1


def set_platform_message(conn: sqlite3.Connection, interaction_id: str, message_id: str) -> None:
    """The platform message that shows the interaction (its buttons are removed from it later)."""
    conn.execute(
        "UPDATE interactions SET platform_message_id = ?, post_state = 'sent' WHERE id = ?",
        (message_id, interaction_id),
    )


def set_post_unknown(conn: sqlite3.Connection, interaction_id: str) -> None:
    """The platform may or may not show the prompt (a timeout after the request left)."""
    conn.execute(
        "UPDATE interactions SET post_state = 'unknown' WHERE id = ? AND post_state = 'sending'",
        (interaction_id,),
    )


def settle_interrupted_posts(conn: sqlite3.Connection, node: str | None = None) -> list[str]:
    """Prompts a crash left ``sending`` become ``unknown``; their ids. On a cluster node, only
    the prompts of runs on ``node`` (its previous life) or on a node no longer in the cluster:
    another live node may be posting its own right now."""
    where = "post_state = 'sending'"
    args: tuple[str, ...] = ()
    if node is not None:
        where += (
            " AND run_id IN (SELECT id FROM runs WHERE node_id = ? "
            "OR node_id NOT IN (SELECT node_id FROM nodes))"
        )
        args = (node,)
    rows = conn.execute(
        f"UPDATE interactions SET post_state = 'unknown' WHERE {where} RETURNING id", args
    ).fetchall()
    return [r["id"] for r in rows]


def toggle_selection(
    conn: sqlite3.Connection, interaction_id: str, option_id: str, order: Sequence[str]
) -> tuple[str, ...] | None:
    """Flip ``option_id`` in the interaction's selection (kept in ``order``); the selection now,
    or None when the interaction is no longer pending."""
    row = conn.execute(
        "SELECT selection FROM interactions WHERE id = ? AND state = 'pending'", (interaction_id,)
    ).fetchone()
    if row is None:
        return None
    picked = set(json.loads(row["selection"]) if row["selection"] else ())
    picked ^= {option_id}
    selection = tuple(o for o in order if o in picked)
    conn.execute(
        "UPDATE interactions SET selection = ? WHERE id = ?", (json.dumps(list(selection)), interaction_id)
    )
    return selection


def answer_interaction(
    conn: sqlite3.Connection, interaction_id: str, answer: Any, answered_by: str | None, now: float
) -> bool:
    """Record the answer; False when the interaction is no longer pending (answered, expired)."""
    cursor = conn.execute(
        "UPDATE interactions SET state = 'answered', answer = ?, answered_by = ?, answered_at = ? "
        "WHERE id = ? AND state = 'pending'",
        (json.dumps(answer, ensure_ascii=False), answered_by, now, interaction_id),
    )
    return cursor.rowcount == 1


def expire_interaction(conn: sqlite3.Connection, interaction_id: str, now: float) -> bool:
    """Nobody answered in time; False when it was answered (or expired) first."""
    cursor = conn.execute(
        "UPDATE interactions SET state = 'expired', answered_at = ? WHERE id = ? AND state = 'pending'",
        (now, interaction_id),
    )
    return cursor.rowcount == 1


def add_approval_rule(
    conn: sqlite3.Connection, thread_id: int, tool: str, arguments: str, approved_by: str | None, now: float
) -> None:
    """``tool`` with exactly ``arguments`` (canonical JSON) runs without asking in this thread."""
    conn.execute(
        "INSERT INTO approval_rules (thread_id, tool, arguments, approved_by, created_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (thread_id, tool, arguments, approved_by, now),
    )


def has_approval_rule(conn: sqlite3.Connection, thread_id: int, tool: str, arguments: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM approval_rules WHERE thread_id = ? AND tool = ? AND arguments = ?",
        (thread_id, tool, arguments),
    ).fetchone()
    return row is not None


def save_checkpoint(
    conn: sqlite3.Connection,
    run_id: int,
    thread_id: int,
    state: dict[str, Any],
    queue_item_ids: Sequence[int],
    now: float,
) -> None:
    """The run is suspended at ``state``; its leased items will be leased again for this run."""
    conn.execute(
        "INSERT INTO run_checkpoints (run_id, thread_id, state, created_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (run_id) DO UPDATE SET state = excluded.state, created_at = excluded.created_at",
        (run_id, thread_id, json.dumps(state, ensure_ascii=False), now),
    )
    if queue_item_ids:
        keep_run(conn, queue_item_ids, run_id)


def load_checkpoint(conn: sqlite3.Connection, run_id: int) -> dict[str, Any] | None:
    """The state ``run_id`` was suspended at, the run running again; None when it has none."""
    row = conn.execute("SELECT state FROM run_checkpoints WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    conn.execute("UPDATE runs SET status = 'running', ended_at = NULL WHERE id = ?", (run_id,))
    state: dict[str, Any] = json.loads(row["state"])
    return state


def drop_checkpoints(conn: sqlite3.Connection, thread_id: int) -> None:
    """The thread's turn ended: nothing of it is resumed any more."""
    conn.execute("DELETE FROM run_checkpoints WHERE thread_id = ?", (thread_id,))
