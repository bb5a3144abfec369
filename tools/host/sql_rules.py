"""What ``db_query`` may read and call, and its size limits: shared by the SQL guard
(:mod:`tools.host.sql_guard`) and the read-only connections that enforce them again. Kept
apart from the guard so that listing the tool does not import the SQL parser.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "ALLOWED_FUNCTIONS",
    "ALLOWED_TABLES",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "MAX_NEEDLE_BYTES",
    "MAX_PATTERN_BYTES",
    "MAX_VALUE_BYTES",
    "PERSONA_PARAM",
    "SCOPES",
    "SIZE_CHECK_FUNCTION",
    "THREAD_PARAM",
    "search_argument_refusal",
]

MAX_LIMIT = 1000
DEFAULT_LIMIT = 100
THREAD_PARAM = "__talon_thread"
PERSONA_PARAM = "__talon_persona"
# The largest string or blob a query may read or build (SQLite's own default is 1 GB): far
# more than any chat message, small enough that a row of many such values stays affordable.
MAX_VALUE_BYTES = 1_000_000
# LIKE/GLOB patterns and trim() character sets: their cost is text length x pattern length
# (about 1 s for a 1 MB text and 200 bytes here), paid in one uninterruptible step.
MAX_PATTERN_BYTES = 200
# What instr() and replace() search for: compared with memcmp, so cheaper per byte.
MAX_NEEDLE_BYTES = 10_000
# Called as __talon_short(value, max_bytes, function_name); not callable from user SQL. On
# PostgreSQL it is one of the __talon_* functions in gateway/store/readonly_pg_functions.sql.
SIZE_CHECK_FUNCTION = "__talon_short"

# table -> (column, parameter) that confines it to the caller. Schedules belong to a persona
# (schedule.manage:own manages all of the persona's schedules), so db_query shows exactly
# what schedule_manage would list; everything else is confined to the current thread.
SCOPES: Mapping[str, tuple[str, str]] = {
    "threads": ("id", THREAD_PARAM),
    "messages": ("thread_id", THREAD_PARAM),
    "memory_items": ("thread_id", THREAD_PARAM),
    "schedules": ("persona", PERSONA_PARAM),
}
ALLOWED_TABLES = frozenset(SCOPES)

# Function names as SQLite reports them to the authorizer (lower case). Nothing that reads
# files, loads code, or builds large values from small input (randomblob, zeroblob, printf).
# On PostgreSQL each means the same (tools/host/sql_postgres.py rewrites them).
ALLOWED_FUNCTIONS = frozenset(
    {
        "count", "sum", "avg", "min", "max", "total", "group_concat",
        "length", "lower", "upper", "substr", "substring", "trim", "ltrim", "rtrim",
        "replace", "instr", "unicode", "coalesce", "ifnull", "nullif", "iif", "abs", "round", "sign",
        "date", "time", "datetime", "julianday", "strftime", "unixepoch", "typeof",
        "json_extract", "->", "->>", "json_type", "json_valid", "json_array_length",
        "like", "glob",
        "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile",
        "lag", "lead", "first_value", "last_value",
    }
)  # fmt: skip


def search_argument_refusal(function: str, size: int, limit: int) -> str:
    """The message for a search argument of ``function`` that is ``size`` bytes long."""
    what = (
        f"the characters {function}() removes are"
        if function.endswith("trim")
        else f"the text {function}() looks for is"
    )
    return f"{what} {size:,} bytes long; at most {limit:,} bytes are allowed"
