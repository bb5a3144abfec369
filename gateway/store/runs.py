"""The ``runs`` table: one row per agent turn (or ad-hoc host-tools session) with its usage.

Statuses: ``running``, then ``completed``, ``failed``, ``canceled`` or, after a crash,
``interrupted``; a host-tools session is ``session`` until it ``ended``. A turn whose reply
could not be committed keeps the model's answer on its run (``answer``), so its retry commits
that answer instead of calling the model again.

Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "KeptAnswer",
    "RunSpend",
    "complete_run",
    "end_run",
    "end_sessions",
    "interrupt_running",
    "keep_answer",
    "resume_kept",
    "start_run",
]


def start_run(
    conn: sqlite3.Connection, thread_id: int, persona: str, model: str, now: float, *, status: str = "running"
) -> int:
    """A new run of ``persona`` on the thread; returns its id."""
    (run_id,) = conn.execute(
        "INSERT INTO runs (thread_id, persona, status, model, started_at) VALUES (?, ?, ?, ?, ?) RETURNING id",
        (thread_id, persona, status, model, now),
    ).fetchone()
    return int(run_id)


@dataclass(frozen=True, slots=True)
class RunSpend:
    """What a run's usage cost and whom it answered (:func:`complete_run`)."""

    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = None  # None: its model has no price
    currency: str | None = None
    sender_id: str | None = None
    channel: str | None = None
    fallbacks: int = 0  # model calls a fallback model answered
    persona: str | None = None  # with ``periods``: the usage rollups the run adds to
    periods: tuple[str, ...] = ()  # the day and month it counts for (``2026-12-01``, ``2026-12``)


def complete_run(
    conn: sqlite3.Connection,
    run_id: int,
    *,
    model: str,
    input_tokens: int,
    output_tokens: int,
    model_calls: int,
    now: float,
    spend: RunSpend | None = None,
) -> None:
    """The run answered: the model that answered (a hook or a fallback may have changed it
    since it began), its usage and, with ``spend``, its cost and whom it answered."""
    columns = (
        "status = 'completed', model = ?, input_tokens = ?, output_tokens = ?, model_calls = ?, ended_at = ?"
    )
    values: list[Any] = [model, input_tokens, output_tokens, model_calls, now]
    if spend is not None:
        columns += (
            ", cache_read_tokens = ?, cache_write_tokens = ?, cost = ?, currency = ?, sender_id = ?, "
            "channel = ?, fallbacks = ?"
        )
        values += [
            spend.cache_read_tokens,
            spend.cache_write_tokens,
            spend.cost,
            spend.currency,
            spend.sender_id,
            spend.channel,
            spend.fallbacks,
        ]
    conn.execute(f"UPDATE runs SET {columns} WHERE id = ?", (*values, run_id))
    if spend is not None:
        subjects = [("user", spend.sender_id), ("persona", spend.persona), ("channel", spend.channel)]
        tokens = input_tokens + output_tokens
        rows = [
            (scope, subject, period, tokens, spend.cost or 0.0, int(spend.cost is None and tokens > 0))
            for scope, subject in subjects
            if subject is not None
            for period in spend.periods
        ]
        conn.executemany(
            "INSERT INTO usage_rollups (scope, subject, period, tokens, cost, runs, unpriced) "
            "VALUES (?, ?, ?, ?, ?, 1, ?) ON CONFLICT (scope, subject, period, shard) DO UPDATE SET "
            "tokens = usage_rollups.tokens + excluded.tokens, cost = usage_rollups.cost + excluded.cost, "
            "runs = usage_rollups.runs + 1, unpriced = usage_rollups.unpriced + excluded.unpriced",
            rows,
        )


def end_run(conn: sqlite3.Connection, run_id: int, status: str, error: str | None, now: float) -> None:
    """The run ended with ``status`` (``failed``, ``canceled``, ``ended``...) and ``error``."""
    conn.execute(
        "UPDATE runs SET status = ?, error = ?, ended_at = ? WHERE id = ?", (status, error, now, run_id)
    )


@dataclass(frozen=True, slots=True)
class KeptAnswer:
    """The model's answer kept on a run whose reply could not be committed."""

    text: str
    tool_calls: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0


def keep_answer(conn: sqlite3.Connection, run_id: int, answer: KeptAnswer, *, error: str, now: float) -> None:
    """The reply failed to commit: the run fails with ``error`` and keeps ``answer``."""
    # ASCII JSON stores whatever the text holds, even what made the reply's own insert fail.
    kept = json.dumps({"text": answer.text, "tool_calls": answer.tool_calls})
    conn.execute(
        "UPDATE runs SET status = 'failed', error = ?, answer = ?, input_tokens = ?, output_tokens = ?, "
        "model_calls = ?, ended_at = ? WHERE id = ?",
        (error, kept, answer.input_tokens, answer.output_tokens, answer.model_calls, now, run_id),
    )


def resume_kept(conn: sqlite3.Connection, run_id: int) -> KeptAnswer | None:
    """The answer ``run_id`` kept, the run running again; None when it kept none."""
    row = conn.execute(
        "SELECT answer, input_tokens, output_tokens, model_calls FROM runs WHERE id = ? AND answer IS NOT NULL",
        (run_id,),
    ).fetchone()
    if row is None:
        return None
    conn.execute("UPDATE runs SET status = 'running', ended_at = NULL WHERE id = ?", (run_id,))
    answer = json.loads(row["answer"])
    return KeptAnswer(
        text=answer["text"],
        tool_calls=list(answer.get("tool_calls") or ()),
        input_tokens=row["input_tokens"],
        output_tokens=row["output_tokens"],
        model_calls=row["model_calls"],
    )


def _end_open(conn: sqlite3.Connection, status: str, ended: str, now: float, node: str | None) -> int:
    """Runs left in ``status`` by a stop become ``ended`` (only ``node``'s, in a cluster)."""
    mine = "" if node is None else " AND node_id = ?"
    cursor = conn.execute(
        f"UPDATE runs SET status = ?, ended_at = ? WHERE status = ?{mine}",
        (ended, now, status, *(() if node is None else (node,))),
    )
    return cursor.rowcount


def interrupt_running(conn: sqlite3.Connection, now: float, node: str | None = None) -> int:
    """Runs a stop left ``running`` become ``interrupted`` (only ``node``'s, in a cluster);
    returns how many."""
    return _end_open(conn, "running", "interrupted", now, node)


def end_sessions(conn: sqlite3.Connection, now: float, node: str | None = None) -> int:
    """Host-tools sessions a stop left open are ``ended`` (only ``node``'s, in a cluster);
    returns how many."""
    return _end_open(conn, "session", "ended", now, node)
