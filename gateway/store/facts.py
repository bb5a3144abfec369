"""Scoped memory: facts, hot memory blocks, and the ranked full-text search over them and the
``memory_items`` of :mod:`gateway.store.memory` (migration 0011).

A :class:`ScopeKey` names whose memory a row is: one thread's, one user's (a sender on one
channel, within one persona) or one persona's. Every function takes the scope keys it may
reach and never returns a row of another. A search is a :class:`gateway.memory_query.Query`
(parsed and bounded before it gets here); on SQLite it is rendered as an FTS5 expression on the
``content`` column and ranked with bm25, on PostgreSQL as a ``tsquery`` (:mod:`gateway.store.facts_pg`). Every function runs on the database thread, inside
``Database.run_transaction`` or ``Database.read``.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gateway.memory_query import And, Node, Not, Or, Query, QueryError, Term
from gateway.store import facts_pg
from gateway.store.dialect import is_postgres
from gateway.store.procedures import procedure_tag

__all__ = [
    "CATEGORIES",
    "SCOPES",
    "FactRow",
    "HotRow",
    "ScopeKey",
    "SearchHit",
    "add_fact",
    "count_facts",
    "get_fact",
    "get_hot",
    "hot_blocks",
    "remove_fact",
    "search",
    "set_hot",
    "supersede_fact",
    "user_owner",
]

Scope = Literal["thread", "user", "persona"]
SCOPES: tuple[Scope, ...] = ("thread", "user", "persona")
CATEGORIES = ("preference", "convention", "decision", "learning")
# A search that ranks for longer than this (terms in nearly every item) is stopped.
SEARCH_SECONDS = 2.0
PROGRESS_STEPS = 1000  # how often (in SQLite VM steps) a search looks at the clock


def user_owner(channel: str, sender_id: str) -> str:
    """The owner of a user's memory: a digest, so a sender's platform id is not spread around."""
    return hashlib.sha256(f"{channel}\0{sender_id}".encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class ScopeKey:
    """Whose memory: ``thread`` (owner = the thread id), ``user`` (owner = :func:`user_owner`)
    or ``persona`` (owner ``''``), always within one persona.

    A thread's memory is the thread's whatever persona wrote it, as with ``memory_access``.
    """

    scope: Scope
    persona: str
    owner: str

    @property
    def thread_id(self) -> int | None:
        return int(self.owner) if self.scope == "thread" else None

    @property
    def tag(self) -> str:
        """The index token of this scope (a thread's is the one its ``memory_items`` carry)."""
        if self.scope == "thread":
            return f"t{int(self.owner)}"
        digest = hashlib.sha256(f"{self.scope}\0{self.persona}\0{self.owner}".encode()).hexdigest()[:24]
        return ("u" if self.scope == "user" else "p") + digest


@dataclass(frozen=True, slots=True)
class FactRow:
    id: int
    scope: Scope
    category: str
    content: str
    evidence: str | None
    supersedes: int | None
    status: str
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class HotRow:
    scope: Scope
    content: str
    updated_at: float


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result, best first.

    Attributes:
        kind (:obj:`str`): ``fact`` for a fact, or a memory_access item's type (``fact``,
            ``note``, ``summary``).
        id (:obj:`int` | :obj:`None`): The fact's id; ``None`` for a memory_access item.
        key (:obj:`str` | :obj:`None`): The memory_access item's key; ``None`` for a fact.
        scope (:obj:`str`): The scope it was found in.
        score (:obj:`float`): bm25 relevance, higher is better.
    """

    kind: str
    id: int | None
    key: str | None
    scope: Scope
    content: str
    category: str | None
    evidence: str | None
    created_at: float
    updated_at: float
    score: float


_FACT = "id, scope, category, content, evidence, supersedes, status, created_at, updated_at"


def add_fact(
    conn: sqlite3.Connection,
    key: ScopeKey,
    *,
    category: str,
    content: str,
    evidence: str | None,
    now: float,
    supersedes: int | None = None,
) -> int:
    """Store an active fact in ``key``'s memory; returns its id."""
    cur = conn.execute(
        "INSERT INTO memory_facts (persona, scope, owner, tag, thread_id, category, content, evidence, "
        "supersedes, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (
            *(key.persona, key.scope, key.owner, key.tag, key.thread_id),
            *(category, content, evidence, supersedes, now, now),
        ),
    )
    return int(cur.fetchone()[0])


def _where(keys: Sequence[ScopeKey]) -> tuple[str, list[str]]:
    """A condition on ``memory_facts`` rows that holds for the rows of ``keys`` only."""
    clauses: list[str] = []
    params: list[str] = []
    for key in keys:
        if key.scope == "thread":  # a thread's memory, whichever persona wrote it
            clauses.append("(scope = 'thread' AND owner = ?)")
            params.append(key.owner)
        else:
            clauses.append("(persona = ? AND scope = ? AND owner = ?)")
            params.extend((key.persona, key.scope, key.owner))
    return (" OR ".join(clauses) or "0"), params


def get_fact(conn: sqlite3.Connection, fact_id: int, keys: Sequence[ScopeKey]) -> FactRow | None:
    """Fact ``fact_id`` if it belongs to one of ``keys`` (active or superseded), else ``None``."""
    where, params = _where(keys)
    row = conn.execute(
        f"SELECT {_FACT} FROM memory_facts WHERE id = ? AND ({where})", (fact_id, *params)
    ).fetchone()
    return None if row is None else FactRow(*row)


def count_facts(conn: sqlite3.Connection, key: ScopeKey) -> int:
    """How many active facts ``key``'s memory holds."""
    where, params = _where([key])
    (count,) = conn.execute(
        f"SELECT COUNT(*) FROM memory_facts WHERE status = 'active' AND ({where})", params
    ).fetchone()
    return int(count)


def supersede_fact(
    conn: sqlite3.Connection,
    old_id: int,
    key: ScopeKey,
    *,
    category: str,
    content: str,
    evidence: str | None,
    now: float,
) -> int:
    """Replace active fact ``old_id`` by a new one in ``key``'s memory that records what it
    supersedes; the old one stays as history, out of search. Returns the new id."""
    new_id = add_fact(
        conn, key, category=category, content=content, evidence=evidence, now=now, supersedes=old_id
    )
    conn.execute("UPDATE memory_facts SET status = 'superseded', updated_at = ? WHERE id = ?", (now, old_id))
    return new_id


def remove_fact(conn: sqlite3.Connection, fact_id: int, keys: Sequence[ScopeKey]) -> bool:
    """Delete fact ``fact_id`` if it belongs to one of ``keys``; False when there was none."""
    where, params = _where(keys)
    return (
        conn.execute(f"DELETE FROM memory_facts WHERE id = ? AND ({where})", (fact_id, *params)).rowcount > 0
    )


def set_hot(conn: sqlite3.Connection, key: ScopeKey, content: str, now: float) -> None:
    """Replace ``key``'s hot memory block; an empty ``content`` removes it."""
    if not content:
        conn.execute(
            "DELETE FROM memory_hot WHERE persona = ? AND scope = ? AND owner = ?",
            (key.persona, key.scope, key.owner),
        )
        return
    conn.execute(
        "INSERT INTO memory_hot (persona, scope, owner, thread_id, content, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (persona, scope, owner) DO UPDATE SET "
        "content = excluded.content, updated_at = excluded.updated_at",
        (key.persona, key.scope, key.owner, key.thread_id, content, now),
    )


def get_hot(conn: sqlite3.Connection, key: ScopeKey) -> HotRow | None:
    row = conn.execute(
        "SELECT scope, content, updated_at FROM memory_hot WHERE persona = ? AND scope = ? AND owner = ?",
        (key.persona, key.scope, key.owner),
    ).fetchone()
    return None if row is None else HotRow(*row)


def hot_blocks(conn: sqlite3.Connection, keys: Sequence[ScopeKey]) -> list[HotRow]:
    """The hot memory blocks of ``keys``, in the order of ``keys``."""
    found = [get_hot(conn, k) for k in keys]
    return [row for row in found if row is not None]


def _render(node: Node) -> str:
    """``node`` as an FTS5 expression on the ``content`` column; every term is quoted, so no
    FTS5 syntax of the model's survives except what the parser recognised."""
    if isinstance(node, Term):
        quoted = '"' + node.text.replace('"', '""') + '"'
        return f"content : {quoted}" + (" *" if node.prefix else "")
    if isinstance(node, Not):
        return f"({_render(node.left)} NOT {_render(node.right)})"
    joiner = " AND " if isinstance(node, And) else " OR "
    assert isinstance(node, And | Or)
    return "(" + joiner.join(_render(p) for p in node.parts) + ")"


def search(
    conn: sqlite3.Connection,
    query: Query,
    keys: Sequence[ScopeKey],
    *,
    category: str | None = None,
    since: float | None = None,
    limit: int = 10,
    procedures_of: str | None = None,
) -> list[SearchHit]:
    """The ``limit`` best matches of ``query`` in the memory of ``keys``, best first.

    ``category`` keeps only facts of that category; ``since`` only rows created at or after it;
    ``procedures_of`` (a persona) adds its procedures (:mod:`gateway.store.procedures`), found
    in the ``persona`` scope with kind ``procedure`` and their name as ``key``.
    """
    if not keys:
        return []
    scope_of: dict[str, Scope] = {k.tag: k.scope for k in keys}
    if procedures_of is not None:
        scope_of[procedure_tag(procedures_of)] = "persona"
    if is_postgres(conn):
        sql, params = facts_pg.hits_query(
            query.root, list(scope_of), category=category, since=since, limit=limit
        )
        with facts_pg.time_limit(conn, SEARCH_SECONDS):
            rows = _ranked(conn, sql, params)
    else:
        rows = _ranked_fts5(conn, query, list(scope_of), category=category, since=since, limit=limit)
    hits = []
    for kind, ref, tags, content, created, rank, cat, evidence, f_updated, key, i_updated in rows:
        is_fact = key is None and kind != "procedure"
        hits.append(
            SearchHit(
                kind=kind,
                id=int(ref) if is_fact else None,
                key=key,
                scope=scope_of.get(tags.split(" ", 1)[0], "thread"),
                content=content,
                category=cat,
                evidence=evidence,
                created_at=created,
                updated_at=f_updated if is_fact else i_updated,
                score=-rank,
            )
        )
    return hits


def _ranked_fts5(
    conn: sqlite3.Connection,
    query: Query,
    tags: list[str],
    *,
    category: str | None,
    since: float | None,
    limit: int,
) -> list[sqlite3.Row]:
    """The ranked index rows on SQLite: an FTS5 match, stopped after :data:`SEARCH_SECONDS`."""
    match = f"{_render(query.root)} AND tags : ({' OR '.join(tags)})"
    if category is not None:
        match += f" AND tags : c{category}"
    where, params = "memory_fts MATCH ?", list[object]([match])
    if since is not None:
        where += " AND created_at >= ?"
        params.append(since)
    deadline = time.monotonic() + SEARCH_SECONDS
    stopped: list[bool] = []

    def past_deadline() -> bool:
        if time.monotonic() > deadline:
            stopped.append(True)
        return bool(stopped)

    conn.set_progress_handler(past_deadline, PROGRESS_STEPS)
    try:
        return _ranked(
            conn,
            f"SELECT rowid, kind, ref, tags, content, created_at, rank FROM memory_fts WHERE {where} "
            "ORDER BY rank LIMIT ?",
            [*params, limit],
        )
    except sqlite3.OperationalError as exc:
        if stopped:  # SQLite words it by where it stopped ("interrupted", "vtable constructor failed")
            raise QueryError(
                f"the query matched too much to rank within {SEARCH_SECONDS:g} s; "
                "add more specific words or use AND instead of OR"
            ) from None
        if "fts5" in str(exc):
            raise QueryError(f"the search index refused the query ({exc}); simplify it") from None
        raise
    finally:
        conn.set_progress_handler(None, 0)


def _ranked(conn: sqlite3.Connection, hits: str, params: list[object]) -> list[sqlite3.Row]:
    """The index rows ``hits`` selects (ranked and limited first), joined to their rows."""
    return conn.execute(
        "SELECT h.kind, h.ref, h.tags, h.content, h.created_at, h.rank, f.category, f.evidence, "
        "f.updated_at, COALESCE(i.key, p.name), COALESCE(i.updated_at, p.updated_at) FROM "
        f"({hits}) AS h "
        "LEFT JOIN memory_facts AS f ON h.rowid > 0 AND h.rowid % 2 = 1 AND f.id = h.ref "
        "LEFT JOIN memory_items AS i ON h.rowid > 0 AND h.rowid % 2 = 0 AND i.id = h.ref "
        "LEFT JOIN procedures AS p ON h.rowid < 0 AND p.id = h.ref ORDER BY h.rank",
        params,
    ).fetchall()
