"""``db_query`` (``db.query:own``): restricted read-only SQL over the caller's own data.

The query is checked and scoped by :mod:`tools.sql_guard`, then run on one of a small pool of
read-only connections (``mode=ro``), each on its own thread, so one slow caller never holds up
another. Each connection's SQLite authorizer permits only SELECT, reads of the four readable
tables and the allowed functions, so a statement that slipped past the syntax check still
cannot read or change anything else.

A query has a hard time limit: a timer interrupts SQLite at the deadline, and a progress
handler checks it between VM instructions. Neither can stop a single instruction, so SQLite's
limits (value length, LIKE pattern length, result columns) and the guard's bound on search
arguments keep every instruction short. Rows are read one at a time against a byte budget
and long cells are cut as they are read, so a result never grows past the budget in memory.
"""

from __future__ import annotations

import asyncio
import base64
import math
import os
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.base import HostTool, ToolContext, ToolError
from tools.sql_guard import (
    ALLOWED_FUNCTIONS,
    ALLOWED_TABLES,
    DEFAULT_LIMIT,
    MAX_LIMIT,
    MAX_PATTERN_BYTES,
    MAX_VALUE_BYTES,
    SIZE_CHECK_FUNCTION,
    prepare_query,
    search_argument_refusal,
)

__all__ = ["TOOL", "close_readonly_connections", "run_query"]

# Seconds a query may run before it is interrupted.
QUERY_TIME_BUDGET = 2.0
# Read-only connections per database, each on its own thread.
POOL_SIZE = 4
# Seconds a call waits for a free connection before it is told to try again.
POOL_WAIT = 2.0
# Bytes of cell data returned at most; rows past it are left out and reported as truncated.
RESULT_BYTE_BUDGET = 1_000_000
# Bytes one text or blob cell returns at most; the rest is cut and marked.
CELL_BYTE_LIMIT = 100_000
# Result columns at most: SQLite holds a row's values together, up to MAX_VALUE_BYTES each.
MAX_COLUMNS = 64
_PROGRESS_STEPS = 1000  # VM instructions between deadline checks
_SMALL_CELL = 8  # what a number or NULL counts against the budget
_ALLOWED_CALLS = ALLOWED_FUNCTIONS | {SIZE_CHECK_FUNCTION}


class _LimitedConnection(sqlite3.Connection):
    """A connection with tight SQLite limits, set as it is opened."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        self.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, MAX_PATTERN_BYTES)
        self.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, MAX_COLUMNS)
        self.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        self.setlimit(sqlite3.SQLITE_LIMIT_EXPR_DEPTH, 100)
        self.setlimit(sqlite3.SQLITE_LIMIT_COMPOUND_SELECT, 1)


def _authorize(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
    if action == sqlite3.SQLITE_SELECT:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_READ and arg1 in ALLOWED_TABLES:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION and arg2 is not None and arg2.lower() in _ALLOWED_CALLS:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


# ---------------------------------------------------------------- reading a result


def _marker(cut: int) -> str:
    return f"…[truncated {cut:,} bytes]"


def _byte_size(value: Any) -> int:
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, str):
        return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    return 0  # a number, converted to a short text by SQLite


def _char_start(data: bytes, end: int) -> int:
    """``end`` moved back to the start of the UTF-8 character it falls in."""
    while end > 0 and data[end] & 0xC0 == 0x80:
        end -= 1
    return end


class _Budget:
    """The bytes a result may still use; cuts long cells while the row is being read."""

    def __init__(self, total: int, cell_limit: int) -> None:
        self.left = total
        self.cell_limit = cell_limit
        self.row_used = 0
        self.row_overflows = False  # a cell of this row was cut to the budget, not the cell limit
        self.cut_any = False

    def start_row(self) -> None:
        self.row_used = 0
        self.row_overflows = False

    def end_row(self) -> None:
        self.left -= self.row_used

    def _take(self, size: int) -> int:
        """How many of ``size`` bytes the cell keeps."""
        room = max(0, min(self.cell_limit, self.left - self.row_used))
        keep = min(size, room)
        if keep < min(size, self.cell_limit):
            self.row_overflows = True
        if keep < size:
            self.cut_any = True
        return keep

    def text(self, data: bytes) -> str:
        keep = self._take(len(data))
        if keep == len(data):
            self.row_used += keep
            return data.decode("utf-8", "replace")
        keep = _char_start(data, keep)
        self.row_used += keep
        return data[:keep].decode("utf-8", "replace") + _marker(len(data) - keep)

    def cell(self, value: Any) -> Any:
        """A fetched value as JSON; text was already cut by :meth:`text` as it was read."""
        if isinstance(value, bytes):
            keep = self._take(len(value))
            self.row_used += keep
            blob: dict[str, Any] = {"base64": base64.b64encode(value[:keep]).decode("ascii")}
            if keep < len(value):
                blob["truncated_bytes"] = len(value) - keep
            return blob
        if not isinstance(value, str):
            if self.left - self.row_used < _SMALL_CELL:
                self.row_overflows = True
            self.row_used += _SMALL_CELL
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        return value


@dataclass(slots=True)
class _Job:
    sql: str
    params: dict[str, Any]
    limit: int
    deadline: float  # time.monotonic()
    refusal: str | None = None  # set by the size check when it stops the query


@dataclass(slots=True)
class _Rows:
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    truncated: bool = False


# ---------------------------------------------------------------- connections


class _Reader:
    """One read-only connection and the one thread it is used on."""

    def __init__(self) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="db-query")
        self._conn: sqlite3.Connection | None = None
        # Orders interrupt() against the end of a statement, so an interrupt meant for one
        # query can never land on the next.
        self._lock = threading.Lock()
        self._job: _Job | None = None
        self._budget: _Budget | None = None
        self._deadline = math.inf

    async def open(self, path: Path) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(self.executor, self._connect, path)
        except BaseException:
            self.executor.shutdown(wait=False)
            raise

    def _connect(self, path: Path) -> None:
        uri = f"{path.as_uri()}?mode=ro"  # path is absolute (see _readonly)
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, factory=_LimitedConnection)
        try:
            conn.execute("PRAGMA query_only = ON")
            conn.execute("PRAGMA busy_timeout = 2000")
            conn.set_progress_handler(self._progress, _PROGRESS_STEPS)
            conn.create_function(SIZE_CHECK_FUNCTION, 3, self._size_check, deterministic=True)
            conn.set_authorizer(_authorize)
            conn.text_factory = self._text
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _progress(self) -> int:
        # A non-zero return interrupts the statement.
        return 1 if time.monotonic() > self._deadline else 0

    def _text(self, data: bytes) -> str:
        # Called for each text value as a row is read, before the row exists as Python objects.
        if self._budget is None:
            return data.decode("utf-8", "replace")
        return self._budget.text(data)

    def _size_check(self, value: Any, limit: int, function: str) -> Any:
        # Returned unchanged, so the checked function sees exactly the value and type it would have.
        size = _byte_size(value)
        if size <= limit:
            return value
        if self._job is not None:
            self._job.refusal = search_argument_refusal(function, size, limit)
        raise ValueError(function)  # SQLite reports it as "user-defined function raised exception"

    def run(self, job: _Job) -> _Rows:
        """Run ``job`` to its end (connection thread)."""
        assert self._conn is not None
        with self._lock:
            self._job = job
        self._deadline = job.deadline
        self._budget = _Budget(RESULT_BYTE_BUDGET, CELL_BYTE_LIMIT)
        cursor: sqlite3.Cursor | None = None
        try:
            cursor = self._conn.execute(job.sql, job.params)
            return self._collect(cursor, job.limit, self._budget)
        finally:
            with self._lock:
                if cursor is not None:
                    cursor.close()
                self._job = None
                self._budget = None

    @staticmethod
    def _collect(cursor: sqlite3.Cursor, limit: int, budget: _Budget) -> _Rows:
        result = _Rows([d[0] for d in cursor.description or ()])
        while True:
            budget.start_row()
            row = cursor.fetchone()
            if row is None:
                break
            if len(result.rows) == limit:
                result.truncated = True
                break
            cells = [budget.cell(v) for v in row]
            if budget.row_overflows and result.rows:
                result.truncated = True
                break
            budget.end_row()
            result.rows.append(cells)
        result.truncated = result.truncated or budget.cut_any
        return result

    def interrupt(self, job: _Job | None = None) -> None:
        """Stop ``job`` (or whatever runs) if it is still running; safe from any thread."""
        with self._lock:
            if self._conn is not None and self._job is not None and job in (None, self._job):
                self._conn.interrupt()

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def close(self) -> None:
        self.interrupt()
        try:
            await asyncio.get_running_loop().run_in_executor(self.executor, self._close)
        finally:
            self.executor.shutdown(wait=False)

    def abandon(self) -> None:
        """Close without waiting (the loop that used this reader is gone)."""
        self.interrupt()
        self.executor.submit(self._close)
        self.executor.shutdown(wait=False)


class _Pool:
    """Up to :data:`POOL_SIZE` readers of one database, opened as they are needed."""

    def __init__(self, path: Path, loop: asyncio.AbstractEventLoop) -> None:
        self.path = path
        self.loop = loop
        self.size = POOL_SIZE
        self._free = asyncio.Semaphore(self.size)
        self._idle: list[_Reader] = []
        self._readers: list[_Reader] = []
        self._closed = False

    async def query(self, sql: str, params: dict[str, Any], limit: int, budget: float) -> _Rows:
        """Run one query on a free reader within ``budget`` seconds, after waiting for one."""
        try:
            async with asyncio.timeout(POOL_WAIT):
                await self._free.acquire()
        except TimeoutError:
            raise ToolError(
                f"all {self.size} database connections stayed busy with other queries for {POOL_WAIT:g} s; "
                "try again in a moment"
            ) from None
        try:
            reader = await self._reader()
        except BaseException:
            self._free.release()
            raise
        job = _Job(sql, params, limit, time.monotonic() + budget)
        timer = self.loop.call_later(budget, reader.interrupt, job)
        running = self.loop.run_in_executor(reader.executor, reader.run, job)
        running.add_done_callback(lambda done: self._finished(done, reader, timer))
        try:
            # Shielded: a caller that stops waiting (a tool timeout) leaves the query to end at
            # its deadline; the reader returns to the pool only then.
            return await asyncio.shield(running)
        except sqlite3.Error as exc:
            raise ToolError(job.refusal or _explain(exc, budget)) from None
        except (OverflowError, UnicodeError) as exc:  # a value the guard let through by mistake
            raise ToolError(f"a value could not be passed to SQLite: {exc}") from None

    async def _reader(self) -> _Reader:
        if self._closed:
            raise ToolError("db_query is shutting down; try again after the restart")
        if self._idle:
            return self._idle.pop()
        reader = _Reader()
        try:
            await reader.open(self.path)
        except sqlite3.Error as exc:
            raise ToolError(f"the database could not be opened for reading: {exc}") from None
        if self._closed:  # closed while this reader was opening
            await reader.close()
            raise ToolError("db_query is shutting down; try again after the restart")
        self._readers.append(reader)
        return reader

    def _finished(self, done: asyncio.Future[_Rows], reader: _Reader, timer: asyncio.TimerHandle) -> None:
        timer.cancel()
        if not done.cancelled():
            done.exception()  # retrieved here when the caller stopped waiting
        if not self._closed:
            self._idle.append(reader)
        self._free.release()

    async def close(self) -> None:
        self._closed = True
        readers, self._readers, self._idle = self._readers, [], []
        await asyncio.gather(*(r.close() for r in readers))

    def abandon(self) -> None:
        self._closed = True
        for reader in self._readers:
            reader.abandon()
        self._readers, self._idle = [], []


_open: dict[Path, _Pool] = {}


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


async def _readonly(path: Path) -> _Pool:
    key = _absolute(path)
    loop = asyncio.get_running_loop()
    pool = _open.get(key)
    if pool is None or pool.loop is not loop:
        if pool is not None:
            pool.abandon()
        pool = _open[key] = _Pool(key, loop)
    return pool


async def close_readonly_connections() -> None:
    """Close every read-only connection and stop their threads (call on daemon shutdown)."""
    while _open:
        _, pool = _open.popitem()
        await pool.close()


def _explain(exc: sqlite3.Error, budget: float) -> str:
    message = str(exc)
    if "interrupted" in message:
        return (
            f"the query ran longer than {budget:g} s and was stopped; narrow it with WHERE conditions, "
            "fewer joins or a smaller LIMIT"
        )
    if "too big" in message:
        return (
            f"a value in the query is larger than {MAX_VALUE_BYTES:,} bytes, the most db_query handles "
            "(string or blob too big); leave out the column that holds it or build smaller values"
        )
    if "pattern too complex" in message:
        return f"a LIKE or GLOB pattern is longer than {MAX_PATTERN_BYTES} bytes; use a shorter pattern"
    if "too many columns in result set" in message:
        return f"the query returns more than {MAX_COLUMNS} columns; select fewer"
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
        blobs appear as ``{"base64": "..."}``; a cut text ends with ``…[truncated N bytes]``, a
        cut blob carries ``truncated_bytes``.

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
    pool = await _readonly(Path(ctx.db.path))
    result = await pool.query(prepared.sql, dict(prepared.params), prepared.limit, QUERY_TIME_BUDGET)
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
        "Run one read-only SELECT against Talon's database. Readable tables: messages, memory_items "
        "and threads (only the current thread's rows) and schedules (only this persona's). No "
        "subqueries, UNION, WITH or writes; use ? placeholders with params. Long values end with "
        "'…[truncated N bytes]'; read further with substr()."
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
