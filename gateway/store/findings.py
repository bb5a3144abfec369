"""Shared findings (migration 0014): entries published within one delegation tree, and the
standing queries of child runs.

Every entry belongs to the root run of its tree (``root_run_id``); every function takes that
root and never returns an entry of another tree. A tree holds at most ``max_entries``
entries (:func:`publish`); entries and subscriptions older than a day are swept by
:func:`sweep`, which each publish calls. Every function runs on the database thread, inside
``Database.run_transaction`` or ``Database.read``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.errors import RefusedError

__all__ = [
    "ENTRY_TYPES",
    "RELATION_TYPES",
    "FindingRow",
    "FindingsFullError",
    "NewFinding",
    "count_findings",
    "deliveries",
    "get_findings",
    "publish",
    "query_findings",
    "recent_findings",
    "subscribe",
    "sweep",
]

ENTRY_TYPES = ("finding", "evidence", "hypothesis", "decision", "artifact", "status")
RELATION_TYPES = ("supports", "contradicts", "depends_on", "supersedes")
SWEEP_BATCH = 200  # old rows each publish deletes at most: bounded work per write


class FindingsFullError(RefusedError):
    """The tree already holds its maximum number of entries."""


@dataclass(frozen=True, slots=True)
class NewFinding:
    root_run_id: int
    run_id: int | None
    persona: str
    type: str
    subject: str
    content: str
    evidence: tuple[str, ...] = ()
    confidence: float = 1.0
    relates_to: tuple[int, ...] = ()
    relation_type: str | None = None


@dataclass(frozen=True, slots=True)
class FindingRow:
    id: int
    run_id: int | None
    persona: str
    type: str
    subject: str
    content: str
    evidence: tuple[str, ...]
    confidence: float
    relates_to: tuple[int, ...]
    relation_type: str | None
    created_at: float


_COLUMNS = (
    "id, run_id, persona, type, subject, content, evidence, confidence, relates_to, relation_type, created_at"
)


def _row(row: Sequence[object]) -> FindingRow:
    values = list(row)
    values[6] = tuple(json.loads(str(values[6])))
    values[8] = tuple(json.loads(str(values[8])))
    return FindingRow(*values)  # type: ignore[arg-type]


def count_findings(conn: sqlite3.Connection, root_run_id: int) -> int:
    (count,) = conn.execute(
        "SELECT COUNT(*) FROM workspace_findings WHERE root_run_id = ?", (root_run_id,)
    ).fetchone()
    return int(count)


def publish(conn: sqlite3.Connection, entry: NewFinding, *, now: float, max_entries: int) -> int:
    """Store ``entry`` in its tree; returns its id.

    Raises:
        :class:`FindingsFullError`: The tree holds ``max_entries`` already.
    """
    sweep(conn, older_than=now - 86400.0)
    if count_findings(conn, entry.root_run_id) >= max_entries:
        raise FindingsFullError(
            f"this run already shared {max_entries} workspace entries, the most one run may hold; "
            "query the existing ones, or supersede one (relates_to it with relation_type supersedes) "
            "in a final summary instead"
        )
    cur = conn.execute(
        "INSERT INTO workspace_findings (root_run_id, run_id, persona, type, subject, content, evidence, "
        "confidence, relates_to, relation_type, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "RETURNING id",
        (
            *(entry.root_run_id, entry.run_id, entry.persona, entry.type, entry.subject, entry.content),
            json.dumps(list(entry.evidence)),
            entry.confidence,
            json.dumps(list(entry.relates_to)),
            entry.relation_type,
            now,
        ),
    )
    return int(cur.fetchone()[0])


def get_findings(conn: sqlite3.Connection, root_run_id: int, ids: Sequence[int]) -> list[FindingRow]:
    """The entries of ``ids`` that belong to the tree (the others are left out)."""
    if not ids:
        return []
    marks = ", ".join("?" for _ in ids)
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM workspace_findings WHERE root_run_id = ? AND id IN ({marks}) ORDER BY id",
        (root_run_id, *ids),
    )
    return [_row(r) for r in rows.fetchall()]


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def query_findings(
    conn: sqlite3.Connection,
    root_run_id: int,
    words: Sequence[str],
    *,
    type: str | None = None,
    limit: int = 20,
) -> list[FindingRow]:
    """Entries of the tree whose subject or content holds every one of ``words`` (case
    folded), newest first. A tree holds a few hundred entries at most, so a scan is enough."""
    where = ["root_run_id = ?"]
    params: list[object] = [root_run_id]
    for word in words:
        where.append("(lower(subject) LIKE ? ESCAPE '\\' OR lower(content) LIKE ? ESCAPE '\\')")
        pattern = f"%{_escape_like(word.lower())}%"
        params += [pattern, pattern]
    if type is not None:
        where.append("type = ?")
        params.append(type)
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM workspace_findings WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?",
        (*params, limit),
    )
    return [_row(r) for r in rows.fetchall()]


def recent_findings(conn: sqlite3.Connection, root_run_id: int, limit: int) -> list[FindingRow]:
    """The tree's newest ``limit`` entries, oldest first."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM workspace_findings WHERE root_run_id = ? ORDER BY id DESC LIMIT ?",
        (root_run_id, limit),
    ).fetchall()
    return [_row(r) for r in reversed(rows)]


def subscribe(
    conn: sqlite3.Connection,
    root_run_id: int,
    run_id: int,
    *,
    subject: str | None,
    type: str | None,
    now: float,
) -> int:
    """A standing query of child run ``run_id``: it is shown entries published after now."""
    (newest,) = conn.execute(
        "SELECT COALESCE(MAX(id), 0) FROM workspace_findings WHERE root_run_id = ?", (root_run_id,)
    ).fetchone()
    cur = conn.execute(
        "INSERT INTO workspace_subscriptions (root_run_id, run_id, subject, type, seen_id, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        (root_run_id, run_id, subject.lower() if subject else None, type, newest, now),
    )
    return int(cur.fetchone()[0])


def deliveries(conn: sqlite3.Connection, run_id: int, *, limit: int) -> list[tuple[int, FindingRow]]:
    """Entries that match ``run_id``'s subscriptions and were published by other runs since it
    last asked, as ``(subscription id, entry)``, at most ``limit``; marks them shown."""
    subs = conn.execute(
        "SELECT id, root_run_id, subject, type, seen_id FROM workspace_subscriptions WHERE run_id = ? "
        "ORDER BY id",
        (run_id,),
    ).fetchall()
    out: list[tuple[int, FindingRow]] = []
    for sub_id, root, subject, kind, seen in subs:
        where = ["root_run_id = ?", "id > ?", "(run_id IS NULL OR run_id != ?)"]
        params: list[object] = [root, seen, run_id]
        if subject:
            where.append("instr(lower(subject), ?) > 0")
            params.append(subject)
        if kind:
            where.append("type = ?")
            params.append(kind)
        room = limit - len(out)
        if room <= 0:
            break
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM workspace_findings WHERE {' AND '.join(where)} ORDER BY id LIMIT ?",
            (*params, room),
        ).fetchall()
        if rows:
            conn.execute("UPDATE workspace_subscriptions SET seen_id = ? WHERE id = ?", (rows[-1][0], sub_id))
            out += [(sub_id, _row(r)) for r in rows]
    return out


def sweep(conn: sqlite3.Connection, *, older_than: float) -> int:
    """Delete up to a batch of entries and subscriptions created before ``older_than``."""
    removed = 0
    for table in ("workspace_findings", "workspace_subscriptions"):
        removed += conn.execute(
            f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE created_at < ? LIMIT ?)",
            (older_than, SWEEP_BATCH),
        ).rowcount
    return removed
