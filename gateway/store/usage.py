"""Usage read from the ``runs`` table: totals for budgets and ``/usage``, breakdowns for
``talon usage``, fallbacks for ``talon status``; and the ``budget_notices`` already sent.

Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "FallbackCount",
    "UsageRow",
    "UsageTotals",
    "fallback_counts",
    "mark_notice",
    "rollup_totals",
    "usage_by",
    "usage_totals",
]

By = Literal["persona", "user", "channel", "model"]
_GROUP = {"persona": "persona", "user": "sender_id", "channel": "channel", "model": "model"}


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """Tokens (in and out), cost (of the priced runs) and runs counted."""

    tokens: int = 0
    cost: float = 0.0
    runs: int = 0
    unpriced: int = 0  # runs with tokens whose model had no price


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One group of ``talon usage --by``."""

    key: str | None
    runs: int
    input_tokens: int
    output_tokens: int
    cost: float
    currency: str | None


@dataclass(frozen=True, slots=True)
class FallbackCount:
    """A persona's runs since a moment that a fallback model answered, and the last such model."""

    persona: str
    runs: int
    fallbacks: int
    last_model: str | None


_TOTALS = (
    "SELECT COALESCE(SUM(input_tokens + output_tokens), 0), COALESCE(SUM(cost), 0), COUNT(*), "
    "COALESCE(SUM(CASE WHEN cost IS NULL AND input_tokens + output_tokens > 0 THEN 1 ELSE 0 END), 0) FROM runs "
)


def usage_totals(
    conn: sqlite3.Connection,
    *,
    since: float,
    persona: str | None = None,
    sender_id: str | None = None,
    channel: str | None = None,
    thread_id: int | None = None,
) -> UsageTotals:
    """What the runs started at or after ``since`` used, narrowed by each filter given."""
    where, params = ["started_at >= ?"], [since]
    for column, value in (("persona", persona), ("sender_id", sender_id), ("channel", channel)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if thread_id is not None:
        where.append("thread_id = ?")
        params.append(thread_id)
    row = conn.execute(_TOTALS + "WHERE " + " AND ".join(where), params).fetchone()
    return UsageTotals(int(row[0]), float(row[1]), int(row[2]), int(row[3]))


def rollup_totals(conn: sqlite3.Connection, keys: Sequence[tuple[str, str, str]]) -> list[UsageTotals]:
    """What each ``(scope, subject, period)`` used (``("user", "U1", "2026-12-01")``), from the
    rollups completed runs add to: one key lookup each, adding up its shards (a cluster's nodes'
    rows, migration 0029)."""
    out = []
    for scope, subject, period in keys:
        row = conn.execute(
            "SELECT COUNT(*), SUM(tokens), SUM(cost), SUM(runs), SUM(unpriced) FROM usage_rollups "
            "WHERE scope = ? AND subject = ? AND period = ?",
            (scope, subject, period),
        ).fetchone()
        out.append(
            UsageTotals() if not row[0] else UsageTotals(int(row[1]), float(row[2]), int(row[3]), int(row[4]))
        )
    return out


def usage_by(conn: sqlite3.Connection, by: By, *, since: float, limit: int = 200) -> list[UsageRow]:
    """Runs started at or after ``since`` grouped by persona, user, channel or model, costliest first."""
    column = _GROUP[by]
    rows = conn.execute(
        f"SELECT {column}, COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), "
        "COALESCE(SUM(cost), 0), MAX(currency) FROM runs WHERE started_at >= ? AND model_calls > 0 "
        f"GROUP BY {column} ORDER BY 5 DESC, 3 + 4 DESC LIMIT ?",
        (since, limit),
    ).fetchall()
    return [UsageRow(r[0], int(r[1]), int(r[2]), int(r[3]), float(r[4]), r[5]) for r in rows]


def fallback_counts(conn: sqlite3.Connection, *, since: float) -> list[FallbackCount]:
    """Per persona, the runs since ``since`` that a fallback model answered (personas without any left out)."""
    rows = conn.execute(
        "SELECT persona, COUNT(*), SUM(fallbacks), "
        "(SELECT r2.model FROM runs r2 WHERE r2.persona = runs.persona AND r2.fallbacks > 0 "
        " AND r2.started_at >= ? ORDER BY r2.id DESC LIMIT 1) "
        "FROM runs WHERE started_at >= ? AND fallbacks > 0 GROUP BY persona ORDER BY persona",
        (since, since),
    ).fetchall()
    return [FallbackCount(r[0], int(r[1]), int(r[2]), r[3]) for r in rows]


def mark_notice(conn: sqlite3.Connection, budget: str, subject: str, period: str, now: float) -> bool:
    """Record the notice of ``budget`` for ``subject`` in ``period``; False when it was sent already."""
    cursor = conn.execute(
        "INSERT INTO budget_notices (budget, subject, period, sent_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING",
        (budget, subject, period, now),
    )
    return cursor.rowcount == 1
