"""``db_query`` (``db.query:own``): restricted read-only SQL over the caller's own data.

The query is checked and scoped by :mod:`tools.sql_guard`, then run on a separate read-only
connection (``mode=ro``) whose SQLite authorizer permits only SELECT, reads of the four
readable tables and the allowed functions, so a statement that slipped past the syntax check
still cannot read or change anything else. A progress handler stops a query that runs past
its time budget.
"""

from __future__ import annotations

import asyncio
import base64
import math
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import aiosqlite

from tools.base import HostTool, ToolContext, ToolError
from tools.sql_guard import ALLOWED_FUNCTIONS, ALLOWED_TABLES, DEFAULT_LIMIT, MAX_LIMIT, prepare_query

__all__ = ["TOOL", "close_readonly_connections", "run_query"]

# Seconds a query may run before it is interrupted.
QUERY_TIME_BUDGET = 2.0
# Characters of cell data returned at most; the rest is cut and reported as truncated.
RESULT_CHAR_BUDGET = 1_000_000
# The largest string or blob a query may build (SQLite's own default is 1 GB).
MAX_VALUE_BYTES = 10_000_000
_PROGRESS_STEPS = 1000  # VM instructions between deadline checks


class _LimitedConnection(sqlite3.Connection):
    """A connection with tight SQLite limits, set as it is opened in aiosqlite's thread."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        self.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        self.setlimit(sqlite3.SQLITE_LIMIT_EXPR_DEPTH, 100)
        self.setlimit(sqlite3.SQLITE_LIMIT_COMPOUND_SELECT, 1)


def _authorize(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
    if action == sqlite3.SQLITE_SELECT:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_READ and arg1 in ALLOWED_TABLES:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION and arg2 is not None and arg2.lower() in ALLOWED_FUNCTIONS:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


class _ReadOnlyDatabase:
    """One read-only connection; queries on it run one at a time."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.conn = conn
        self.lock = asyncio.Lock()
        self.deadline = math.inf

    @classmethod
    async def open(cls, path: Path) -> _ReadOnlyDatabase:
        uri = f"{path.as_uri()}?mode=ro"  # path is absolute (see _readonly)
        conn = await aiosqlite.connect(uri, uri=True, isolation_level=None, factory=_LimitedConnection)
        try:
            await conn.execute("PRAGMA query_only = ON")
            await conn.execute("PRAGMA busy_timeout = 2000")
            readonly = cls(conn)
            await conn.set_progress_handler(readonly._progress, _PROGRESS_STEPS)
            await conn.set_authorizer(_authorize)
        except BaseException:
            await conn.close()
            raise
        return readonly

    def _progress(self) -> int:
        # Runs in the connection's thread; a non-zero return interrupts the statement.
        return 1 if time.monotonic() > self.deadline else 0

    async def query(
        self, sql: str, params: dict[str, Any], limit: int, budget: float
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        async with self.lock:
            # Not reset afterwards: a query whose caller stopped waiting still runs in the
            # connection's thread and must still meet the deadline.
            self.deadline = time.monotonic() + budget
            async with self.conn.execute(sql, params) as cursor:
                rows = await cursor.fetchmany(limit + 1)
                columns = [d[0] for d in cursor.description or ()]
        return columns, list(rows)


_open: dict[Path, _ReadOnlyDatabase] = {}


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


async def _readonly(path: Path) -> _ReadOnlyDatabase:
    key = _absolute(path)
    found = _open.get(key)
    if found is None:
        fresh = await _ReadOnlyDatabase.open(key)
        found = _open.setdefault(key, fresh)
        if found is not fresh:  # another call opened one meanwhile
            await fresh.conn.close()
    return found


async def close_readonly_connections() -> None:
    """Close every cached read-only connection (call on daemon shutdown)."""
    while _open:
        _, db = _open.popitem()
        await db.conn.close()


def _cell(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str | bytes) else 8


def _explain(exc: sqlite3.Error, budget: float) -> str:
    message = str(exc)
    if "interrupted" in message:
        return (
            f"the query ran longer than {budget:g} s and was stopped; narrow it with WHERE conditions, "
            "fewer joins or a smaller LIMIT"
        )
    if "too big" in message:
        return (
            f"the query built a value larger than {MAX_VALUE_BYTES // 1_000_000} MB (string or blob too big)"
        )
    if "not authorized" in message or "prohibited" in message or "authorization denied" in message:
        return f"the query was refused by the database ({message}); only plain reads of the allowed tables are possible"
    return f"the query failed: {message}"


async def run_query(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """Run a caller's SELECT, confined to its thread (and its persona for schedules).

    Args:
        ctx (:class:`tools.base.ToolContext`): The calling run.
        args (:obj:`dict`): ``sql`` (required), ``params`` (array), ``limit`` (1-1000, default 100).

    Returns:
        :obj:`dict`: ``{"columns": [...], "rows": [[...], ...], "row_count": n, "truncated": bool}``;
        blobs appear as ``{"base64": "..."}``.

    Raises:
        :class:`tools.base.ToolError`: The query was refused, failed or ran too long.
    """
    prepared = prepare_query(
        args.get("sql"),
        args.get("params"),
        args.get("limit"),
        thread_id=ctx.thread_id,
        persona=ctx.persona.name,
    )
    db = await _readonly(Path(ctx.db.path))
    budget = QUERY_TIME_BUDGET
    try:
        columns, fetched = await db.query(prepared.sql, dict(prepared.params), prepared.limit, budget)
    except sqlite3.Error as exc:
        raise ToolError(_explain(exc, budget)) from None
    truncated = len(fetched) > prepared.limit
    rows: list[list[Any]] = []
    used = 0
    for row in fetched[: prepared.limit]:
        used += sum(_size(v) for v in row)
        if used > RESULT_CHAR_BUDGET and rows:
            truncated = True
            break
        rows.append([_cell(v) for v in row])
    return {"columns": columns, "rows": rows, "row_count": len(rows), "truncated": truncated}


TOOL = HostTool(
    mcp_name="db_query",
    internal_name="db.query",
    prefix="db.query",
    description=(
        "Run one read-only SELECT against Talon's database. Readable tables: messages, memory_items "
        "and threads (only the current thread's rows) and schedules (only this persona's). No "
        "subqueries, UNION, WITH or writes; use ? placeholders with params."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "sql": {"type": "string", "description": "One plain SELECT statement; ? marks a parameter."},
            "params": {
                "type": "array",
                "items": {"type": ["string", "number", "boolean", "null"]},
                "description": "Values for the ? placeholders, in order.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "default": DEFAULT_LIMIT,
                "description": "Rows to return at most.",
            },
        },
        "required": ["sql"],
        "additionalProperties": False,
    },
    handler=run_query,
    timeout=QUERY_TIME_BUDGET + 8.0,
)
