"""``db_query`` (``db.query:own``): restricted read-only SQL over the caller's own data.

The query is checked and scoped by :mod:`tools.host.sql_guard`, then run within
:data:`QUERY_TIME_BUDGET` on the store's pool of read-only connections: on SQLite
(:mod:`gateway.store.readonly`) connections that may read only the guard's tables and call
only its functions; on PostgreSQL (:mod:`gateway.store.readonly_pg`) read-only transactions as
a role that may read only those tables, the SQL rewritten for PostgreSQL by the guard
(:mod:`tools.host.sql_postgres`). This module words what went wrong for the model, the same
whichever database answered.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.lazy_import import import_off_loop
from gateway.store.readonly import (
    MAX_COLUMNS,
    POOL_WAIT,
    ReadOnlyAccess,
    ReadOnlyPool,
    ReadOnlyQueryError,
    readonly_pool,
)
from tools.base import HostTool, ToolContext, ToolError
from tools.host.sql_rules import (
    ALLOWED_FUNCTIONS,
    ALLOWED_TABLES,
    DEFAULT_LIMIT,
    MAX_LIMIT,
    MAX_PATTERN_BYTES,
    MAX_VALUE_BYTES,
    SIZE_CHECK_FUNCTION,
    search_argument_refusal,
)

if TYPE_CHECKING:
    from gateway.store.readonly_pg import PgReadOnlyPool

__all__ = ["ACCESS", "TOOL", "run_query"]

# Seconds a query may run before it is interrupted.
QUERY_TIME_BUDGET = 2.0
# What the read-only connections may do: exactly what the guard lets a query do.
ACCESS = ReadOnlyAccess(
    tables=ALLOWED_TABLES,
    functions=ALLOWED_FUNCTIONS,
    max_value_bytes=MAX_VALUE_BYTES,
    max_pattern_bytes=MAX_PATTERN_BYTES,
    size_check=SIZE_CHECK_FUNCTION,
    refusal=search_argument_refusal,
)


def _explain(exc: ReadOnlyQueryError, budget: float) -> str:
    match exc.problem:
        case "busy":
            return f"{exc.detail}; try again in a moment"
        case "closed":
            return "db_query is shutting down; try again after the restart"
        case "unavailable":
            return f"the database could not be opened for reading: {exc.detail}"
        case "interrupted":
            return (
                f"the query ran longer than {budget:g} s and was stopped; narrow it with WHERE conditions, "
                "fewer joins or a smaller LIMIT"
            )
        case "too_big":
            return (
                f"a value in the query is larger than {MAX_VALUE_BYTES:,} bytes, the most db_query handles "
                "(string or blob too big); leave out the column that holds it or build smaller values"
            )
        case "pattern":
            return f"a LIKE or GLOB pattern is longer than {MAX_PATTERN_BYTES} bytes; use a shorter pattern"
        case "columns":
            return f"the query returns more than {MAX_COLUMNS} columns; select fewer"
        case "denied":
            return (
                f"the query was refused by the database ({exc.detail}); only plain reads of the allowed "
                "tables are possible"
            )
        case "argument":
            return exc.detail
        case "value":  # a value the guard let through by mistake
            return f"a value could not be passed to the database: {exc.detail}"
        case "setup":
            return f"db_query is not set up on this PostgreSQL database yet: {exc.detail}"
    return f"the query failed: {exc.detail}"


async def run_query(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """Run a caller's SELECT, confined to its thread (and its persona for schedules).

    Args:
        ctx (:class:`tools.base.ToolContext`): The calling run.
        args (:obj:`dict`): ``sql`` (required), ``params`` (array), ``limit`` (1-1000, default 100).

    Returns:
        :obj:`dict`: ``{"columns": [...], "rows": [[...], ...], "row_count": n, "truncated": bool}``;
        blobs appear as ``{"base64": "..."}``; a cut text ends with ``…[truncated N bytes]``, a
        cut blob carries ``truncated_bytes``.

    Raises:
        :class:`tools.base.ToolError`: The query was refused, failed or ran too long.
    """
    postgresql = ctx.db.engine.name == "postgresql"
    # The guard's SQL parser is imported on the first query, off the loop: few turns query.
    guard = await import_off_loop("tools.host.sql_guard")
    prepared = guard.prepare_query(
        args.get("sql"),
        args.get("params"),
        args.get("limit"),
        thread_id=ctx.thread_id,
        persona=ctx.persona.name,
        engine="postgresql" if postgresql else "sqlite",
    )
    budget = QUERY_TIME_BUDGET
    pool: ReadOnlyPool | PgReadOnlyPool
    if postgresql and ctx.db.url:
        readonly_pg = await import_off_loop("gateway.store.readonly_pg")
        pool = readonly_pg.pg_readonly_pool(ctx.db.url, ACCESS)
    else:
        pool = readonly_pool(Path(ctx.db.path), ACCESS)
    try:
        result = await pool.query(prepared.sql, dict(prepared.params), prepared.limit, budget)
    except ReadOnlyQueryError as exc:
        raise ToolError(_explain(exc, budget)) from None
    return {
        "columns": result.columns,
        "rows": result.rows,
        "row_count": len(result.rows),
        "truncated": result.truncated,
    }


TOOL = HostTool(
    mcp_name="db_query",
    internal_name="db.query",
    prefix="db.query",
    description=(
        "Run one read-only SELECT (SQLite syntax, on SQLite or PostgreSQL alike) against Talon's "
        "database. Readable tables: messages, memory_items and threads (only the current thread's "
        "rows) and schedules (only this persona's). No subqueries, UNION, WITH or writes; use ? "
        "placeholders with params. Long values end with '…[truncated N bytes]'; read further with "
        "substr()."
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
    timeout=POOL_WAIT + QUERY_TIME_BUDGET + 6.0,
)
