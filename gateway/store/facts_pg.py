"""The memory search on PostgreSQL: :class:`gateway.memory_query.Query` as a ``tsquery``.

``memory_fts`` there is a plain table kept by triggers, with ``document``, the English
``tsvector`` of its content (stemmed, as SQLite's porter tokenizer stems). Every term is a
parameter turned into a query by ``phraseto_tsquery`` (a prefix term by ``to_tsquery`` of the
quoted word), so nothing the model writes is read as ``tsquery`` syntax. Rank is
``ts_rank_cd``, negated so that lower sorts first as FTS5's ``rank`` does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gateway.memory_query import And, Node, Not, Or, QueryError, Term

__all__ = ["hits_query", "time_limit"]


def _tsquery(node: Node, params: list[object]) -> str:
    if isinstance(node, Term):
        params.append(node.text)
        if node.prefix:
            return "to_tsquery('english', quote_literal(?) || ':*')"
        return "phraseto_tsquery('english', ?)"
    if isinstance(node, Not):
        left = _tsquery(node.left, params)
        return f"({left} && !! {_tsquery(node.right, params)})"
    assert isinstance(node, And | Or)
    joiner = " && " if isinstance(node, And) else " || "
    return "(" + joiner.join(_tsquery(p, params) for p in node.parts) + ")"


def hits_query(
    root: Node, tags: list[str], *, category: str | None, since: float | None, limit: int
) -> tuple[str, list[object]]:
    """The SQL (and its parameters) of the best ``limit`` index rows whose first tag is one of
    ``tags``: columns ``rowid, kind, ref, tags, content, created_at, rank``, best first."""
    params: list[object] = []
    query = _tsquery(root, params)
    where = "document @@ s.q AND split_part(tags, ' ', 1) = ANY(?)"
    params.append(tags)
    if category is not None:
        where += " AND tags || ' ' LIKE ?"
        params.append(f"% c{category} %")
    if since is not None:
        where += " AND created_at >= ?"
        params.append(since)
    params.append(limit)
    sql = (
        "SELECT rowid, kind, ref, tags, content, created_at, -ts_rank_cd(document, s.q) AS rank "
        f"FROM memory_fts, (SELECT {query} AS q) AS s WHERE {where} ORDER BY rank LIMIT ?"
    )
    return sql, params


@contextmanager
def time_limit(conn: Any, seconds: float) -> Iterator[None]:
    """Stop the statements inside after ``seconds`` with a :class:`QueryError` (in the
    caller's transaction; its end restores the limit)."""
    conn.execute(f"SET LOCAL statement_timeout = {int(seconds * 1000)}")
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "statement timeout" in str(exc):
            raise QueryError(
                f"the query matched too much to rank within {seconds:g} s; "
                "add more specific words or use AND instead of OR"
            ) from None
        raise
    conn.execute("SET LOCAL statement_timeout = DEFAULT")
