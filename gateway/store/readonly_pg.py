"""Read-only connections for ``db_query`` on a PostgreSQL store: a bounded pool of its own.

The PostgreSQL twin of :mod:`gateway.store.readonly`, with the same limits, the same
:class:`~gateway.store.readonly.ReadOnlyQueryError` vocabulary and the same result shape.
Each database gets up to :data:`~gateway.store.readonly.POOL_SIZE` connections of its own
(never the store's writer or reader, so a query holds up no write), opened as they are needed.

What a query may do is enforced by the database, not only by the caller's checks. Each query
is one transaction::

    BEGIN READ ONLY; SET LOCAL ROLE talon_query_<db>; SET LOCAL statement_timeout ...;
    DECLARE talon_query CURSOR FOR <the statement>; FETCH ...; ROLLBACK

as the role of :mod:`gateway.store.query_role`, which may read only the access's tables, with
a server-side time limit (and a client-side cancel just after it, should the server's not
fire), one worker and no JIT. Rows are read one at a time (single-row mode) against the same
byte budget as SQLite's, text and blobs cut as they are read
(:class:`~gateway.store.readonly_results.ResultBudget`); a value longer than the access's
``max_value_bytes`` is refused as SQLite refuses it, and the ``__talon_*`` functions keep
SQLite's other limits (their SQLSTATEs ``TL001``-``TL003`` map to the same problems).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import sql
from psycopg.adapt import Loader
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import Format

from gateway.store import readonly
from gateway.store.pg_connection import KEEPALIVES
from gateway.store.query_role import RoleReport, inspect_role, prepare_role
from gateway.store.readonly import MAX_COLUMNS, QUERY_TABLES, Problem, ReadOnlyAccess, ReadOnlyQueryError
from gateway.store.readonly_results import QueryResult, ResultBudget

__all__ = ["PgReadOnlyPool", "close_pg_readonly_connections", "inspect_query_role", "pg_readonly_pool"]

# Seconds after a query's time budget at which the client cancels it, should the server's
# statement_timeout not have stopped it by then.
_CANCEL_GRACE = 0.5
# A session left inside a transaction (its process stalled) is ended by the server.
_IDLE_IN_TRANSACTION = "15s"
_CURSOR = "talon_query"
# Type OIDs: text, varchar, bpchar, name, "char", unknown; bytea; jsonb.
_TEXT_TYPES = (25, 1043, 1042, 19, 18, 705)
_BYTEA, _JSONB = 17, 3802
# The SQLSTATEs of the __talon_* functions' limits (readonly_pg_functions.sql).
_LIMITS: dict[str, Problem] = {"TL001": "argument", "TL002": "too_big", "TL003": "pattern"}


def _statement_timeout(budget: float) -> int:
    """Milliseconds for the server's ``statement_timeout`` (0 turns it off)."""
    return max(1, int(budget * 1000))


def _problem(exc: psycopg.Error) -> Problem:
    state = exc.sqlstate or ""
    if state in _LIMITS:
        return _LIMITS[state]
    if isinstance(exc, psycopg.errors.QueryCanceled):
        return "interrupted"
    if isinstance(exc, psycopg.errors.InsufficientPrivilege | psycopg.errors.ReadOnlySqlTransaction):
        return "denied"
    if isinstance(exc, psycopg.errors.ProgramLimitExceeded | psycopg.errors.OutOfMemory):
        return "too_big"
    if isinstance(exc, psycopg.OperationalError) and not state:
        return "unavailable"  # the connection, not the query
    return "failed"


def _detail(exc: psycopg.Error) -> str:
    diag = exc.diag
    text = diag.message_primary or str(exc).splitlines()[0]
    return f"{text} ({diag.message_hint})" if diag.message_hint else text


async def _connect(url: str) -> psycopg.AsyncConnection[Any]:
    """A connection of db_query's own (autocommit, never prepared: each statement is new)."""
    params = {**KEEPALIVES, **conninfo_to_dict(url), "application_name": "talon-query"}
    return await psycopg.AsyncConnection.connect(**params, autocommit=True, prepare_threshold=None)


async def inspect_query_role(url: str) -> RoleReport:
    """What stands between db_query and its role on the database at ``url``, changing nothing
    (``talon doctor``).

    Raises:
        psycopg.Error: The database could not be reached.
    """
    conn = await _connect(url)
    try:
        return await inspect_role(conn, QUERY_TABLES)
    finally:
        await conn.close()


def _loaders(budget: ResultBudget, max_value: int) -> dict[int, type[Loader]]:
    """Binary loaders that cut each value to ``budget`` as the row is read."""

    def sized(data: memoryview | bytes) -> memoryview | bytes:
        if len(data) > max_value:  # as SQLite refuses to read it; psycopg lets this through
            raise ReadOnlyQueryError("too_big", "string or blob too big")
        return data

    class Text(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> str:
            return budget.text(sized(data))

    class Blob(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> dict[str, Any]:
            return budget.blob(sized(data))

    class Json(Loader):
        # json_extract() as a whole column: the value as SQLite's json_extract() gives it.
        format = Format.BINARY

        def load(self, data: Any) -> Any:
            value = json.loads(bytes(sized(data)[1:]))  # after jsonb's version byte
            if isinstance(value, bool):
                return int(value)
            if isinstance(value, dict | list):
                value = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
            if isinstance(value, str):
                return budget.text(value.encode())
            return value

    return {**dict.fromkeys(_TEXT_TYPES, Text), _BYTEA: Blob, _JSONB: Json}


class _Reader:
    """One connection, used by one query at a time."""

    def __init__(
        self, conn: psycopg.AsyncConnection[Any], begin: sql.Composed, access: ReadOnlyAccess
    ) -> None:
        self.conn = conn
        self.begin = begin
        self.access = access
        self._cancelling: asyncio.Task[None] | None = None

    @property
    def usable(self) -> bool:
        return not (self.conn.closed or self.conn.broken)

    def cancel(self) -> None:
        """Ask the server to stop the running statement (the server's own limit did not)."""
        if self.usable and self._cancelling is None:
            self._cancelling = asyncio.get_running_loop().create_task(self.conn.cancel_safe(timeout=5))

    async def run(self, statement: str, params: Mapping[str, Any], limit: int, budget: float) -> QueryResult:
        """Run one statement to its end, or raise :class:`ReadOnlyQueryError`."""
        deadline = time.monotonic() + budget
        timer = asyncio.get_running_loop().call_later(budget + _CANCEL_GRACE, self.cancel)
        try:
            await self.conn.execute(self.begin + sql.SQL("; SET LOCAL statement_timeout = {}").format(
                _statement_timeout(budget)))  # fmt: skip
            return await self._read(statement, params, limit, deadline)
        except psycopg.Error as exc:
            problem = _problem(exc)
            if problem == "argument":  # the size check: which function, how long, what limit
                size, limit_bytes = (exc.diag.message_detail or "0 0").split()
                detail = self.access.refusal(exc.diag.message_primary or "?", int(size), int(limit_bytes))
                raise ReadOnlyQueryError("argument", detail) from None
            raise ReadOnlyQueryError(problem, _detail(exc)) from None
        finally:
            timer.cancel()
            await self._end()

    async def _read(
        self, statement: str, params: Mapping[str, Any], limit: int, deadline: float
    ) -> QueryResult:
        async with self.conn.cursor() as cursor:
            return await self._fetch(cursor, statement, params, limit, deadline)

    async def _fetch(
        self,
        cursor: psycopg.AsyncCursor[Any],
        statement: str,
        params: Mapping[str, Any],
        limit: int,
        deadline: float,
    ) -> QueryResult:
        # A cursor, so that the columns are known before any row is (and when there is none).
        await cursor.execute(f"DECLARE {_CURSOR} NO SCROLL CURSOR FOR {statement}", params)
        await cursor.execute(f"FETCH FORWARD 0 FROM {_CURSOR}", binary=True)
        columns = [c.name for c in cursor.description or ()]
        if len(columns) > MAX_COLUMNS:
            raise ReadOnlyQueryError("columns", f"too many columns in result set ({len(columns)})")
        budget = ResultBudget(readonly.RESULT_BYTE_BUDGET, readonly.CELL_BYTE_LIMIT)
        for oid, loader in _loaders(budget, self.access.max_value_bytes).items():
            cursor.adapters.register_loader(oid, loader)
        left = max(0.001, deadline - time.monotonic())
        await cursor.execute(sql.SQL("SET LOCAL statement_timeout = {}").format(_statement_timeout(left)))
        result = QueryResult(columns)
        rows = cursor.stream(f"FETCH FORWARD {limit + 1} FROM {_CURSOR}", binary=True)
        try:
            while True:
                budget.start_row()
                try:
                    row = await anext(rows)
                except StopAsyncIteration:
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
        finally:
            await rows.aclose()  # a stream left early is cancelled by psycopg
        result.truncated = result.truncated or budget.cut_any
        return result

    async def _end(self) -> None:
        if self._cancelling is not None:
            await asyncio.gather(self._cancelling, return_exceptions=True)
            self._cancelling = None
        if self.usable:
            try:
                await self.conn.execute("ROLLBACK")
            except psycopg.Error:
                await self.conn.close()  # not reusable; the pool drops it

    async def close(self) -> None:
        if self.usable and self.conn.info.transaction_status == psycopg.pq.TransactionStatus.ACTIVE:
            self.cancel()
        await self.conn.close()

    def abandon(self) -> None:
        """Close the socket now (the loop that used this reader is gone)."""
        self.conn.pgconn.finish()


class PgReadOnlyPool:
    """Up to :data:`~gateway.store.readonly.POOL_SIZE` read-only connections to one database.

    Use :func:`pg_readonly_pool` to get one.
    """

    def __init__(self, url: str, access: ReadOnlyAccess, loop: asyncio.AbstractEventLoop) -> None:
        self.url = url
        self.access = access
        self.loop = loop
        self.size = readonly.POOL_SIZE
        self._free = asyncio.Semaphore(self.size)
        self._idle: list[_Reader] = []
        self._readers: list[_Reader] = []
        self._closed = False
        self._setup = asyncio.Lock()
        self._begin: sql.Composed | None = None  # set once the role is ready

    async def query(
        self, statement: str, params: Mapping[str, Any], limit: int, budget: float
    ) -> QueryResult:
        """Run one statement on a free connection within ``budget`` seconds, after waiting for one.

        ``statement`` uses psycopg's ``%(name)s`` placeholders. Returns at most ``limit`` rows.

        Raises:
            :class:`ReadOnlyQueryError`: It did not run to its end.
        """
        wait = readonly.POOL_WAIT
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
        running = self.loop.create_task(reader.run(statement, params, limit, budget))
        running.add_done_callback(lambda done: self._finished(done, reader))
        # Shielded: a caller that stops waiting (a tool timeout) leaves the query to end at its
        # deadline; the connection returns to the pool only then.
        return await asyncio.shield(running)

    async def _reader(self) -> _Reader:
        if self._closed:
            raise ReadOnlyQueryError("closed", "the read-only connections are closed")
        if self._idle:
            return self._idle.pop()
        try:
            conn = await _connect(self.url)
        except psycopg.Error as exc:
            raise ReadOnlyQueryError("unavailable", _detail(exc)) from None
        try:
            begin = await self._ready(conn)
            await conn.execute(sql.SQL(
                "SET default_transaction_read_only = on; SET idle_in_transaction_session_timeout = {}; "
                "SET client_encoding = 'UTF8'").format(_IDLE_IN_TRANSACTION))  # fmt: skip
        except BaseException:
            await conn.close()
            raise
        reader = _Reader(conn, begin, self.access)
        if self._closed:  # closed while this reader was opening
            await reader.close()
            raise ReadOnlyQueryError("closed", "the read-only connections are closed")
        self._readers.append(reader)
        return reader

    async def _ready(self, conn: psycopg.AsyncConnection[Any]) -> sql.Composed:
        """The statements that start a query, once the role is set up (tried again until it is)."""
        async with self._setup:
            if self._begin is None:
                try:
                    report: RoleReport = await prepare_role(conn, self.access.tables)
                except psycopg.Error as exc:
                    raise ReadOnlyQueryError("unavailable", _detail(exc)) from None
                if not report.ready:
                    raise ReadOnlyQueryError("setup", report.advice())
                self._begin = sql.SQL(
                    "BEGIN READ ONLY; SET LOCAL ROLE {role}; SET LOCAL search_path TO {schema}; "
                    "SET LOCAL work_mem = '4MB'; SET LOCAL max_parallel_workers_per_gather = 0; "
                    "SET LOCAL jit = off; SET LOCAL standard_conforming_strings = on"
                ).format(role=sql.Identifier(report.role), schema=sql.Identifier(report.schema))
            return self._begin

    def _finished(self, done: asyncio.Future[QueryResult], reader: _Reader) -> None:
        if not done.cancelled():
            done.exception()  # retrieved here when the caller stopped waiting
        if self._closed or not reader.usable:
            if reader in self._readers:
                self._readers.remove(reader)
            if not self._closed:
                self.loop.create_task(reader.close())
        else:
            self._idle.append(reader)
        self._free.release()

    async def close(self) -> None:
        self._closed = True
        readers, self._readers, self._idle = self._readers, [], []
        await asyncio.gather(*(r.close() for r in readers), return_exceptions=True)

    def abandon(self) -> None:
        self._closed = True
        for reader in self._readers:
            reader.abandon()
        self._readers, self._idle = [], []


_open: dict[tuple[str, ReadOnlyAccess], PgReadOnlyPool] = {}


def pg_readonly_pool(url: str, access: ReadOnlyAccess) -> PgReadOnlyPool:
    """The pool of ``access`` connections to the database at ``url`` (call on the event loop)."""
    key = (url, access)
    loop = asyncio.get_running_loop()
    pool = _open.get(key)
    if pool is None or pool.loop is not loop:
        if pool is not None:
            pool.abandon()
        pool = _open[key] = PgReadOnlyPool(url, access, loop)
    return pool


async def close_pg_readonly_connections() -> None:
    """Close every PostgreSQL read-only connection (call on daemon shutdown)."""
    while _open:
        _, pool = _open.popitem()
        await pool.close()
