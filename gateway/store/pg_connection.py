"""A psycopg connection shaped like the ``sqlite3.Connection`` the store's functions take.

The table-group functions are written once, in SQL both engines accept (``ON CONFLICT``,
``RETURNING``, no engine functions). What differs below the SQL is covered here, so they
need no second copy:

- placeholders: the store writes ``?``; PostgreSQL wants ``$1``, ``$2``, ...;
- rows: read by index and by column name, as ``sqlite3.Row`` reads;
- errors: PostgreSQL's are raised as ``sqlite3``'s classes (the psycopg error is the cause),
  so a caller catches one set of exceptions whichever engine refused; a serialization
  failure or deadlock is :class:`~gateway.store.db.WriteConflictError`, which reruns the
  transaction.

Statements run on psycopg's libpq layer (``psycopg.pq``) with psycopg's own adaptation
(``Transformer``), not through its cursors: a cursor's execute costs about 110 µs of Python
per statement, this path about 30 µs, and a reply is some 22 statements on the daemon's one
core (bench/bench_e2e.py ``--postgres``). A connection keeps one ``Transformer`` and each
statement's row class, as a cursor keeps its own: made per statement they took a third of
the writer thread's CPU (1.35 against 0.90 s per 1,000 replies, 2026-12-03). A statement
seen twice is prepared on the server, so later runs skip its parse and plan; as in
psycopg's own cache, a statement is prepared once per mix of parameter types (an integer is
sent as the smallest type that holds it).

The connection is in autocommit mode, as the store's SQLite connections are: the store opens
its transactions itself (``BEGIN``, ``COMMIT``). Between the two, statements are pipelined
(:mod:`gateway.store.pg_pipeline`): a result is waited for only when it is read.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache, partial
from typing import Any

import psycopg
from psycopg import pq
from psycopg.adapt import PyFormat, Transformer
from psycopg.conninfo import conninfo_to_dict

from gateway.store.db import DatabaseUnreachableError, WriteConflictError
from gateway.store.pg_pipeline import Pipeline, Sent

__all__ = ["KEEPALIVES", "ROWS_PER_INSERT", "PgConnection", "PgRow", "connect", "multi_row", "translate"]


class PgRow(tuple[Any, ...]):
    """A row read by position or by column name, like ``sqlite3.Row``."""

    __slots__ = ()
    _names: dict[str, int] = {}

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


@lru_cache(maxsize=256)
def _row_class(names: tuple[str, ...]) -> type[PgRow]:
    return type("PgRow", (PgRow,), {"__slots__": (), "_names": {n: i for i, n in enumerate(names)}})


@lru_cache(maxsize=2048)
def translate(sql: str) -> str:
    """``sql`` with its ``?`` placeholders numbered as PostgreSQL's ``$1``, ``$2``, ...

    Quoted strings and identifiers are copied as they are.
    """
    out: list[str] = []
    quote = ""
    number = 0
    for ch in sql:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "?":
            number += 1
            out.append(f"${number}")
            continue
        out.append(ch)
    return "".join(out)


@lru_cache(maxsize=2048)
def _wire(sql: str) -> bytes:
    return translate(sql).encode()


def _as_sqlite_error(exc: psycopg.Error) -> sqlite3.Error:
    if isinstance(exc, psycopg.errors.SerializationFailure | psycopg.errors.DeadlockDetected):
        return WriteConflictError(str(exc))
    if isinstance(exc, psycopg.OperationalError) and _connection_lost(exc.sqlstate or ""):
        return DatabaseUnreachableError(str(exc))
    if isinstance(exc, psycopg.IntegrityError):
        return sqlite3.IntegrityError(str(exc))
    if isinstance(exc, psycopg.OperationalError):
        return sqlite3.OperationalError(str(exc))
    return sqlite3.DatabaseError(str(exc))


def _connection_lost(sqlstate: str) -> bool:
    """No SQLSTATE (libpq's own failure: no server, a closed socket), a connection exception
    (class 08) or the server shutting the session down (57P01-57P03); not a statement timeout."""
    return not sqlstate or sqlstate.startswith(("08", "57P"))


ROWS_PER_INSERT = 200  # rows of one multi-row INSERT: far below PostgreSQL's 65,535 parameters

# The one VALUES tuple of an INSERT: placeholders and plain words, nothing nested or quoted.
_VALUES = re.compile(r"\bVALUES\s*(\([^()'\"]*\))", re.IGNORECASE)


@lru_cache(maxsize=512)
def _insert_parts(sql: str) -> tuple[str, str, str] | None:
    """(before, the VALUES tuple, after) of an ``INSERT ... VALUES (...)`` with one plain
    tuple; None for any other statement."""
    if not sql.lstrip()[:6].upper() == "INSERT":
        return None
    found = list(_VALUES.finditer(sql))
    if len(found) != 1:
        return None
    match = found[0]
    return sql[: match.start(1)], match.group(1), sql[match.end(1) :]


def multi_row(sql: str, rows: int) -> str | None:
    """``sql`` inserting ``rows`` rows in one statement, or None when it is not an
    ``INSERT ... VALUES (...)`` with one plain tuple."""
    parts = _insert_parts(sql)
    return None if parts is None else _repeat(parts, rows)


def _repeat(parts: tuple[str, str, str], rows: int) -> str:
    before, one, after = parts
    return before + ", ".join([one] * rows) + after


class PgCursor:
    """The result of one statement: ``fetchone``, ``fetchall``, ``rowcount`` and iteration.

    In a transaction the result may not be read yet (:mod:`gateway.store.pg_pipeline`): it is
    read when first looked at, and a failure of the transaction is raised then.
    """

    __slots__ = ("_count", "_next", "_pending", "_rows")

    def __init__(
        self, rows: list[PgRow], count: int, pending: tuple[Pipeline, Sent, _Loader, bytes] | None = None
    ) -> None:
        self._rows = rows
        self._next = 0
        self._count = count
        self._pending = pending

    @property
    def rowcount(self) -> int:
        self._settle()
        return self._count

    def fetchone(self) -> PgRow | None:
        self._settle()
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[PgRow]:
        self._settle()
        rows = self._rows[self._next :]
        self._next = len(self._rows)
        return rows

    def __iter__(self) -> Iterator[PgRow]:
        return iter(self.fetchall())

    def close(self) -> None:
        self._rows = []

    def _settle(self) -> None:
        if self._pending is None:
            return
        pipeline, sent, loader, query = self._pending
        try:
            pipeline.settle(sent)
        except psycopg.Error as exc:
            raise _as_sqlite_error(exc) from exc
        if sent.error is not None:
            raise sent.error
        assert sent.result is not None
        self._pending = None
        self._rows, self._count = loader.outcome(sent.result, query)


class _Summed:
    """The cursor of several statements (an ``executemany``): their rows counted together."""

    __slots__ = ("_parts",)

    def __init__(self, parts: list[PgCursor]) -> None:
        self._parts = parts

    @property
    def rowcount(self) -> int:
        return sum(max(part.rowcount, 0) for part in self._parts)

    def fetchone(self) -> None:
        return None

    def fetchall(self) -> list[PgRow]:
        return []

    def __iter__(self) -> Iterator[PgRow]:
        return iter(())

    def close(self) -> None:
        self._parts = []


class _Loader:
    """A connection's one ``Transformer`` (it dumps parameters and loads rows, and keeps the
    adapters it looked up, as a psycopg cursor's does) and the row class of each statement
    (its column names, decoded once)."""

    __slots__ = ("row_classes", "tx")

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.tx = Transformer(conn)
        self.row_classes: dict[tuple[bytes, int], type[PgRow]] = {}

    def outcome(self, result: pq.abc.PGresult, query: bytes) -> tuple[list[PgRow], int]:
        """(rows, rowcount) of ``query``'s successful result."""
        if result.status != _TUPLES_OK:
            count = result.command_tuples
            return [], -1 if count is None else count
        key = (query, result.nfields)
        row_class = self.row_classes.get(key)
        if row_class is None:
            names = tuple((result.fname(i) or b"").decode() for i in range(result.nfields))
            row_class = _row_class(names)
            if len(self.row_classes) < PREPARED_MAX:  # the store's own statements, not one-offs
                self.row_classes[key] = row_class
        self.tx.set_pgresult(result)
        rows = self.tx.load_rows(0, result.ntuples, row_class)
        return rows, len(rows)


# Distinct statements a connection keeps prepared; any beyond run unprepared. The store's
# statements are a few hundred; the rest are multi-row INSERTs of one-off sizes.
PREPARED_MAX = 1024

_TUPLES_OK = pq.ExecStatus.TUPLES_OK
_COMMAND_OK = pq.ExecStatus.COMMAND_OK
_ENDS = (b"COMMIT", b"ROLLBACK")


class PgConnection:
    """The part of ``sqlite3.Connection`` the store uses, over one psycopg connection."""

    dialect = "postgresql"

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self._pg = conn.pgconn
        self._encoding = conn.info.encoding
        # (statement, parameter types) -> its server-side name; None once seen, not prepared
        self._prepared: dict[tuple[bytes, tuple[int, ...]], bytes | None] = {}
        self._names = itertools.count(1)
        self._pipeline: Pipeline | None = None  # the open transaction's
        self._loader = _Loader(conn)
        self._park: Callable[[Sent], None] | None = None

    @property
    def park(self) -> Callable[[Sent], None] | None:
        """What the open transaction's statements call before waiting for a result
        (:mod:`gateway.store.pg_interleave`); None: they just wait."""
        return self._park

    @park.setter
    def park(self, park: Callable[[Sent], None] | None) -> None:
        self._park = park
        if self._pipeline is not None:
            self._pipeline.park = park

    @property
    def in_transaction(self) -> bool:
        return self._pipeline is not None or self._pg.transaction_status != pq.TransactionStatus.IDLE

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PgCursor:
        query = _wire(sql)
        if self._pipeline is not None:
            if query in _ENDS:
                return self._end(query)
            return self._send(query, params or ())
        if not params and query.startswith(b"BEGIN"):
            try:
                self._pipeline = Pipeline(self._pg, self._error_of)
                self._pipeline.park = self._park
            except psycopg.Error as exc:  # the connection is gone
                raise _as_sqlite_error(exc) from exc
            self._send(query, ())
            return PgCursor([], -1)
        return self._run(query, params or ())

    def executemany(
        self, sql: str, rows: Iterable[Sequence[Any]], *, pipelined: bool = False
    ) -> PgCursor | _Summed:
        """``sql`` once per row. An ``INSERT ... VALUES (...)`` runs as one statement of many
        rows (:func:`multi_row`), up to :data:`ROWS_PER_INSERT` at a time: a reply's trace
        events and usage rollups are a dozen rows, each a statement otherwise. Its rows must
        not upsert one key twice, which PostgreSQL refuses within one statement. ``pipelined``
        (a bulk copy): psycopg's own executemany, one round trip for all the rows; the open
        transaction's statements are read first and the rest of it runs unpipelined."""
        values = [tuple(r) for r in rows]
        if pipelined:
            self._leave_pipeline()
            try:
                with psycopg.RawCursor(self._conn) as cursor:
                    cursor.executemany(translate(sql), values)
                    return PgCursor([], cursor.rowcount)
            except psycopg.Error as exc:
                raise _as_sqlite_error(exc) from exc
        parts = _insert_parts(sql) if len(values) > 1 else None
        if parts is None:
            return _Summed([self.execute(sql, row) for row in values])
        return _Summed(
            [
                self.execute(_repeat(parts, len(part)), [v for row in part for v in row])
                for part in (values[i : i + ROWS_PER_INSERT] for i in range(0, len(values), ROWS_PER_INSERT))
            ]
        )

    def script(self, sql: str) -> None:
        """Run several statements as they are (a migration file): no placeholder rewriting."""
        self._leave_pipeline()
        self._loader.row_classes.clear()  # a migration may rename the columns a statement reads
        try:
            self._conn.execute(sql.encode(), prepare=False)
        except psycopg.Error as exc:
            raise _as_sqlite_error(exc) from exc

    def commit(self) -> None:
        self.execute("COMMIT")

    def rollback(self) -> None:
        if self._pg.status == pq.ConnStatus.BAD:
            self._pipeline = None  # the server ended the transaction with the connection
            return
        if self.in_transaction:
            self.execute("ROLLBACK")

    def close(self) -> None:
        self._conn.close()

    def _run(self, query: bytes, params: Sequence[Any]) -> PgCursor:
        """``query`` outside a transaction: sent, and its result waited for."""
        tx = self._loader.tx
        try:
            if params:
                values = tx.dump_sequence(params, [PyFormat.AUTO] * len(params))
                key = (query, tuple(tx.types))
                name = self._name(key)
                if name is None:
                    result = self._pg.exec_params(query, values, tx.types, tx.formats)
                else:
                    if self._prepared[key] != name:  # first use of the name
                        prepared = self._pg.prepare(name, query, tx.types)
                        if prepared.status != _COMMAND_OK:
                            raise self._error_of(prepared)
                        self._prepared[key] = name
                    result = self._pg.exec_prepared(name, values, tx.formats)
            else:  # the simple protocol, one message
                result = self._pg.exec_(query)
        except psycopg.Error as exc:
            raise _as_sqlite_error(exc) from exc
        if result.status not in (_TUPLES_OK, _COMMAND_OK):
            raise self._error_of(result)
        rows, count = self._loader.outcome(result, query)
        return PgCursor(rows, count)

    def _send(self, query: bytes, params: Sequence[Any]) -> PgCursor:
        """``query`` in the open transaction: sent, its result read when looked at."""
        assert self._pipeline is not None
        pipeline = self._pipeline
        tx = self._loader.tx
        try:
            values = tx.dump_sequence(params, [PyFormat.AUTO] * len(params)) if params else None
            types, formats = (tx.types, tx.formats) if params else ((), ())
            key = (query, tuple(types))
            name = self._name(key) if params else None  # BEGIN and the like: not worth naming
            if name is None:
                sent = pipeline.send(query, values, types, formats)
            else:
                if self._prepared[key] != name:
                    self._prepared[key] = name
                    pipeline.prepare(name, query, types, on_failure=partial(self._forget, key))
                sent = pipeline.send_prepared(name, values or (), formats)
        except psycopg.Error as exc:
            raise _as_sqlite_error(exc) from exc
        return PgCursor([], -1, (pipeline, sent, self._loader, query))

    def _name(self, key: tuple[bytes, tuple[int, ...]]) -> bytes | None:
        """The prepared statement to run ``key`` as: None the first time (it runs unnamed),
        then its name (new when the caller must prepare it: it is not yet ``_prepared[key]``)."""
        if key not in self._prepared:
            if len(self._prepared) < PREPARED_MAX:
                self._prepared[key] = None
            return None
        return self._prepared[key] or b"talon_%d" % next(self._names)

    def _forget(self, key: tuple[bytes, tuple[int, ...]]) -> None:
        self._prepared[key] = None  # its PREPARE failed: prepare it again next time

    def _leave_pipeline(self) -> None:
        """Before psycopg's own calls: the open transaction's statements read, and run without
        a pipeline from here to its end."""
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is None:
            return
        try:
            error = pipeline.leave()
        except psycopg.Error as exc:
            raise _as_sqlite_error(exc) from exc
        if error is not None:
            raise error

    def _end(self, query: bytes) -> PgCursor:
        pipeline, self._pipeline = self._pipeline, None
        assert pipeline is not None
        try:
            error = pipeline.end(query)
        except psycopg.Error as exc:
            raise _as_sqlite_error(exc) from exc
        if error is not None and query == b"COMMIT":
            raise error
        return PgCursor([], -1)

    def _error_of(self, result: pq.abc.PGresult) -> sqlite3.Error:
        error = psycopg.errors.error_from_result(result, encoding=self._encoding)
        if self._pg.status == pq.ConnStatus.BAD:  # the server went away: no SQLSTATE to go by
            error = psycopg.OperationalError(str(error) or "the connection to PostgreSQL was lost")
        mapped = _as_sqlite_error(error)
        mapped.__cause__ = error
        return mapped


# TCP keepalives unless the URL sets its own: a server host that vanishes is noticed in about
# 11 s instead of the kernel's two hours, so a node stops instead of hanging on a dead socket.
KEEPALIVES = {"keepalives": "1", "keepalives_idle": "5", "keepalives_interval": "2", "keepalives_count": "3"}


# JIT compiles a plan whose estimated cost passes jit_above_cost, which takes 50-350 ms; the
# store's statements run in a millisecond. A cluster node prices sequential scans out
# (postgres.py), so its statements on tables without a fitting index passed the threshold, and
# the heartbeat's sweep of runs held the writer 300 ms at every beat (seen with auto_explain).
NO_JIT = "-c jit=off"


def connect(url: str, *, application_name: str) -> PgConnection:
    """A new autocommit connection to ``url``.

    Raises:
        sqlite3.OperationalError: the server cannot be reached or refused the login.
    """
    try:
        params = {**KEEPALIVES, **conninfo_to_dict(url), "application_name": application_name}
        params["options"] = f"{NO_JIT} {params.get('options') or ''}".strip()  # the URL's own win
        conn = psycopg.connect(**params, autocommit=True)
    except psycopg.Error as exc:
        raise _as_sqlite_error(exc) from exc
    return PgConnection(conn)
