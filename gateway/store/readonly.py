"""Read-only connections for queries written by someone else (``db_query``): a bounded pool.

Each database gets up to :data:`POOL_SIZE` connections opened ``mode=ro`` and ``query_only``,
each on its own thread, so one slow query never holds up another. What a connection may do is
the caller's :class:`ReadOnlyAccess`: SQLite's authorizer permits only SELECT, reads of its
tables and calls of its functions, so a statement that slipped past the caller's own checks
still cannot read or change anything else.

A query has a hard time limit: a timer interrupts SQLite at the deadline, and a progress
handler checks it between VM instructions. Neither can stop a single instruction, so SQLite's
limits (value length, LIKE pattern length, result columns) and the caller's size check on
search arguments keep every instruction short. Rows are read one at a time against a byte
budget and long cells are cut as they are read, so a result never grows past the budget in
memory.

Failures raise :class:`ReadOnlyQueryError` with a :data:`Problem` the caller words for its
users; the pool itself never decides what a person is told.
"""

from __future__ import annotations

import asyncio
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gateway.errors import RefusedError
from gateway.store.readonly_results import QueryResult, ResultBudget

__all__ = [
    "MAX_COLUMNS",
    "POOL_SIZE",
    "POOL_WAIT",
    "QUERY_TABLES",
    "Problem",
    "QueryResult",
    "ReadOnlyAccess",
    "ReadOnlyPool",
    "ReadOnlyQueryError",
    "close_readonly_connections",
    "readonly_pool",
]

# The tables db_query may read (DESIGN §4); tools.host.sql_rules scopes each to its caller.
QUERY_TABLES = frozenset({"threads", "messages", "memory_items", "schedules"})
# Read-only connections per database, each on its own thread.
POOL_SIZE = 4
# Seconds a call waits for a free connection before it is told to try again.
POOL_WAIT = 2.0
# Bytes of cell data returned at most; rows past it are left out and reported as truncated.
RESULT_BYTE_BUDGET = 1_000_000
# Bytes one text or blob cell returns at most; the rest is cut and marked.
CELL_BYTE_LIMIT = 100_000
# Result columns at most: SQLite holds a row's values together, up to the value limit each.
MAX_COLUMNS = 64
_PROGRESS_STEPS = 1000  # VM instructions between deadline checks

Problem = Literal[
    "busy",  # every connection stayed busy for POOL_WAIT
    "closed",  # the pool is shutting down
    "unavailable",  # the database could not be opened for reading
    "interrupted",  # the query ran past its time budget
    "too_big",  # a value passed the length limit
    "pattern",  # a LIKE or GLOB pattern passed its limit
    "columns",  # more result columns than MAX_COLUMNS
    "denied",  # the authorizer refused a table, function or statement
    "argument",  # the size check refused a search argument (detail: the access's refusal)
    "value",  # a parameter could not be passed to the database
    "setup",  # PostgreSQL: the query role is not ready (detail: what is wrong and how to fix it)
    "failed",  # any other database error
]


class ReadOnlyQueryError(RefusedError):
    """A read-only query did not run to its end.

    Attributes:
        problem (:data:`Problem`): What went wrong.
        detail (:obj:`str`): The database's own message (or the refusal, for ``argument``).
    """

    def __init__(self, problem: Problem, detail: str) -> None:
        super().__init__(detail)
        self.problem: Problem = problem
        self.detail = detail


@dataclass(frozen=True, slots=True)
class ReadOnlyAccess:
    """What the connections of a pool may do.

    Attributes:
        tables (frozenset[:obj:`str`]): The tables a query may read.
        functions (frozenset[:obj:`str`]): The functions it may call, as SQLite names them (lower case).
        max_value_bytes (:obj:`int`): The longest string or blob a query may read or build.
        max_pattern_bytes (:obj:`int`): The longest LIKE or GLOB pattern.
        size_check (:obj:`str`): The name the size check is registered under, called as
            ``size_check(value, max_bytes, function_name)``: it returns ``value`` unchanged, or
            stops the query when ``value`` is longer than ``max_bytes``.
        refusal (Callable[[:obj:`str`, :obj:`int`, :obj:`int`], :obj:`str`]): The detail of
            that refusal, from ``(function_name, size, max_bytes)``.
    """

    tables: frozenset[str]
    functions: frozenset[str]
    max_value_bytes: int
    max_pattern_bytes: int
    size_check: str
    refusal: Callable[[str, int, int], str]


def _authorizer(
    access: ReadOnlyAccess,
) -> Callable[[int, str | None, str | None, str | None, str | None], int]:
    calls = access.functions | {access.size_check}

    def authorize(
        action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None
    ) -> int:
        if action == sqlite3.SQLITE_SELECT:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ and arg1 in access.tables:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION and arg2 is not None and arg2.lower() in calls:
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY

    return authorize


def _problem(exc: sqlite3.Error) -> Problem:
    message = str(exc)
    if "interrupted" in message:
        return "interrupted"
    if "too big" in message:
        return "too_big"
    if "pattern too complex" in message:
        return "pattern"
    if "too many columns in result set" in message:
        return "columns"
    if "not authorized" in message or "prohibited" in message or "authorization denied" in message:
        return "denied"
    return "failed"


# ---------------------------------------------------------------- reading a result


def _byte_size(value: Any) -> int:
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, str):
        return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    return 0  # a number, converted to a short text by SQLite


def _collect(cursor: sqlite3.Cursor, limit: int, budget: ResultBudget) -> QueryResult:
    result = QueryResult([d[0] for d in cursor.description or ()])
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


@dataclass(slots=True)
class _Job:
    sql: str
    params: Mapping[str, Any]
    limit: int
    deadline: float  # time.monotonic()
    refusal: str | None = None  # set by the size check when it stops the query


# ---------------------------------------------------------------- connections


class _Reader:
    """One read-only connection and the one thread it is used on."""

    def __init__(self, access: ReadOnlyAccess) -> None:
        self.access = access
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="db-query")
        self._conn: sqlite3.Connection | None = None
        # Orders interrupt() against the end of a statement, so an interrupt meant for one
        # query can never land on the next.
        self._lock = threading.Lock()
        self._job: _Job | None = None
        self._budget: ResultBudget | None = None
        self._deadline = math.inf

    async def open(self, path: Path) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(self.executor, self._connect, path)
        except BaseException:
            self.executor.shutdown(wait=False)
            raise

    def _connect(self, path: Path) -> None:
        uri = f"{path.as_uri()}?mode=ro"  # path is absolute (see readonly_pool)
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        try:
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self.access.max_value_bytes)
            conn.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, self.access.max_pattern_bytes)
            conn.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, MAX_COLUMNS)
            conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
            conn.setlimit(sqlite3.SQLITE_LIMIT_EXPR_DEPTH, 100)
            conn.setlimit(sqlite3.SQLITE_LIMIT_COMPOUND_SELECT, 1)
            conn.execute("PRAGMA query_only = ON")
            conn.execute("PRAGMA busy_timeout = 2000")
            conn.set_progress_handler(self._progress, _PROGRESS_STEPS)
            conn.create_function(self.access.size_check, 3, self._size_check, deterministic=True)
            conn.set_authorizer(_authorizer(self.access))
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
            self._job.refusal = self.access.refusal(function, size, limit)
        raise ValueError(function)  # SQLite reports it as "user-defined function raised exception"

    def run(self, job: _Job) -> QueryResult:
        """Run ``job`` to its end (connection thread)."""
        assert self._conn is not None
        with self._lock:
            self._job = job
        self._deadline = job.deadline
        self._budget = ResultBudget(RESULT_BYTE_BUDGET, CELL_BYTE_LIMIT)
        cursor: sqlite3.Cursor | None = None
        try:
            cursor = self._conn.execute(job.sql, job.params)
            return _collect(cursor, job.limit, self._budget)
        finally:
            with self._lock:
                if cursor is not None:
                    cursor.close()
                self._job = None
                self._budget = None

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


class ReadOnlyPool:
    """Up to :data:`POOL_SIZE` read-only connections to one database, opened as they are needed.

    Use :func:`readonly_pool` to get one.
    """

    def __init__(self, path: Path, access: ReadOnlyAccess, loop: asyncio.AbstractEventLoop) -> None:
        self.path = path
        self.access = access
        self.loop = loop
        self.size = POOL_SIZE
        self._free = asyncio.Semaphore(self.size)
        self._idle: list[_Reader] = []
        self._readers: list[_Reader] = []
        self._closed = False

    async def query(self, sql: str, params: Mapping[str, Any], limit: int, budget: float) -> QueryResult:
        """Run one statement on a free connection within ``budget`` seconds, after waiting for one.

        Returns at most ``limit`` rows.

        Raises:
            :class:`ReadOnlyQueryError`: It did not run to its end.
        """
        wait = POOL_WAIT
        try:
            async with asyncio.timeout(wait):
                await self._free.acquire()
        except TimeoutError:
            raise ReadOnlyQueryError(
                "busy", f"all {self.size} database connections stayed busy with other queries for {wait:g} s"
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
            # its deadline; the connection returns to the pool only then.
            return await asyncio.shield(running)
        except sqlite3.Error as exc:
            if job.refusal is not None:
                raise ReadOnlyQueryError("argument", job.refusal) from None
            raise ReadOnlyQueryError(_problem(exc), str(exc)) from None
        except (OverflowError, UnicodeError) as exc:
            raise ReadOnlyQueryError("value", str(exc)) from None

    async def _reader(self) -> _Reader:
        if self._closed:
            raise ReadOnlyQueryError("closed", "the read-only connections are closed")
        if self._idle:
            return self._idle.pop()
        reader = _Reader(self.access)
        try:
            await reader.open(self.path)
        except sqlite3.Error as exc:
            raise ReadOnlyQueryError("unavailable", str(exc)) from None
        if self._closed:  # closed while this reader was opening
            await reader.close()
            raise ReadOnlyQueryError("closed", "the read-only connections are closed")
        self._readers.append(reader)
        return reader

    def _finished(
        self, done: asyncio.Future[QueryResult], reader: _Reader, timer: asyncio.TimerHandle
    ) -> None:
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


_open: dict[tuple[Path, ReadOnlyAccess], ReadOnlyPool] = {}


def readonly_pool(path: Path, access: ReadOnlyAccess) -> ReadOnlyPool:
    """The pool of ``access`` connections to the database at ``path`` (call on the event loop)."""
    key = (Path(os.path.abspath(path)), access)
    loop = asyncio.get_running_loop()
    pool = _open.get(key)
    if pool is None or pool.loop is not loop:
        if pool is not None:
            pool.abandon()
        pool = _open[key] = ReadOnlyPool(key[0], access, loop)
    return pool


async def close_readonly_connections() -> None:
    """Close every read-only connection and stop their threads (call on daemon shutdown)."""
    while _open:
        _, pool = _open.popitem()
        await pool.close()
