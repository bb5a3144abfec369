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
per statement, this path about 30 µs, and a reply is some 25 statements on the daemon's one
core (bench/bench_e2e.py ``--postgres``). A statement seen twice is prepared on the server,
so later runs skip its parse and plan; as in psycopg's own cache, a statement is prepared
once per mix of parameter types (an integer is sent as the smallest type that holds it).

The connection is in autocommit mode, as the store's SQLite connections are: the store opens
its transactions itself (``BEGIN``, ``COMMIT``).
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any, NoReturn

import psycopg
from psycopg import pq
from psycopg.adapt import PyFormat, Transformer
from psycopg.conninfo import conninfo_to_dict

from gateway.store.db import WriteConflictError

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
    if isinstance(exc, psycopg.IntegrityError):
        return sqlite3.IntegrityError(str(exc))
    if isinstance(exc, psycopg.OperationalError):
        return sqlite3.OperationalError(str(exc))
    return sqlite3.DatabaseError(str(exc))


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
    """The result of one statement: ``fetchone``, ``fetchall``, ``rowcount`` and iteration."""

    __slots__ = ("_next", "_rows", "rowcount")

    def __init__(self, rows: list[PgRow], rowcount: int) -> None:
        self._rows = rows
        self._next = 0
        self.rowcount = rowcount

    def fetchone(self) -> PgRow | None:
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[PgRow]:
        rows = self._rows[self._next :]
        self._next = len(self._rows)
        return rows

    def __iter__(self) -> Iterator[PgRow]:
        return iter(self.fetchall())

    def close(self) -> None:
        self._rows = []


# Distinct statements a connection keeps prepared; any beyond run unprepared. The store's
# statements are a few hundred; the rest are multi-row INSERTs of one-off sizes.
PREPARED_MAX = 1024

_TUPLES_OK = pq.ExecStatus.TUPLES_OK
_COMMAND_OK = pq.ExecStatus.COMMAND_OK


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

    @property
    def in_transaction(self) -> bool:
        return self._pg.transaction_status != pq.TransactionStatus.IDLE

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PgCursor:
        return self._run(_wire(sql), params or ())

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]], *, pipelined: bool = False) -> PgCursor:
        """``sql`` once per row. An ``INSERT ... VALUES (...)`` runs as one statement of many
        rows (:func:`multi_row`), up to :data:`ROWS_PER_INSERT` at a time: a reply's trace
        events and usage rollups are a dozen rows, each a round trip otherwise. Its rows must
        not upsert one key twice, which PostgreSQL refuses within one statement. Other
        statements run one at a time unless ``pipelined`` (psycopg's executemany, one round
        trip): a pipeline that a conflict with another node aborted logs a warning as psycopg
        tears it down, though the conflict only means the transaction runs again. A bulk copy
        pipelines."""
        values = [tuple(r) for r in rows]
        if pipelined:
            try:
                with psycopg.RawCursor(self._conn) as cursor:
                    cursor.executemany(translate(sql), values)
                    return PgCursor([], cursor.rowcount)
            except psycopg.Error as exc:
                raise _as_sqlite_error(exc) from exc
        parts = _insert_parts(sql) if len(values) > 1 else None
        if parts is None:
            count = 0
            for row in values:
                count += max(self._run(_wire(sql), row).rowcount, 0)
            return PgCursor([], count)
        count = 0
        for start in range(0, len(values), ROWS_PER_INSERT):
            part = values[start : start + ROWS_PER_INSERT]
            query = _wire(_repeat(parts, len(part)))
            count += max(self._run(query, [v for row in part for v in row]).rowcount, 0)
        return PgCursor([], count)

    def script(self, sql: str) -> None:
        """Run several statements as they are (a migration file): no placeholder rewriting."""
        try:
            self._conn.execute(sql.encode(), prepare=False)
        except psycopg.Error as exc:
            raise _as_sqlite_error(exc) from exc

    def commit(self) -> None:
        self.execute("COMMIT")

    def rollback(self) -> None:
        if self.in_transaction:
            self.execute("ROLLBACK")

    def close(self) -> None:
        self._conn.close()

    def _run(self, query: bytes, params: Sequence[Any]) -> PgCursor:
        tx = Transformer(self._conn)
        try:
            if params:
                values = tx.dump_sequence(params, [PyFormat.AUTO] * len(params))
                result = self._send(query, values, tx.types, tx.formats)
            else:  # BEGIN, COMMIT and the like: the simple protocol, one message
                result = self._pg.exec_(query)
        except psycopg.Error as exc:
            raise _as_sqlite_error(exc) from exc
        status = result.status
        if status == _TUPLES_OK:
            names = tuple((result.fname(i) or b"").decode() for i in range(result.nfields))
            tx.set_pgresult(result)
            rows = tx.load_rows(0, result.ntuples, _row_class(names))
            return PgCursor(rows, len(rows))
        if status == _COMMAND_OK:
            count = result.command_tuples
            return PgCursor([], -1 if count is None else count)
        self._fail(result)

    def _send(
        self, query: bytes, values: Sequence[Any], types: Sequence[int], formats: Sequence[pq.Format]
    ) -> pq.abc.PGresult:
        """Run ``query``: unnamed the first time, prepared from the second."""
        key = (query, tuple(types))
        name = self._prepared.get(key, b"")
        if name == b"":
            if len(self._prepared) < PREPARED_MAX:
                self._prepared[key] = None
            return self._pg.exec_params(query, values, types, formats)
        if name is None:
            name = b"talon_%d" % next(self._names)
            prepared = self._pg.prepare(name, query, types)
            if prepared.status != _COMMAND_OK:
                self._fail(prepared)
            self._prepared[key] = name
        return self._pg.exec_prepared(name, values, formats)

    def _fail(self, result: pq.abc.PGresult) -> NoReturn:
        error = psycopg.errors.error_from_result(result, encoding=self._encoding)
        if self._pg.status == pq.ConnStatus.BAD:  # the server went away: no SQLSTATE to go by
            error = psycopg.OperationalError(str(error) or "the connection to PostgreSQL was lost")
        raise _as_sqlite_error(error) from error


# TCP keepalives unless the URL sets its own: a server host that vanishes is noticed in about
# 11 s instead of the kernel's two hours, so a node stops instead of hanging on a dead socket.
KEEPALIVES = {"keepalives": "1", "keepalives_idle": "5", "keepalives_interval": "2", "keepalives_count": "3"}


def connect(url: str, *, application_name: str) -> PgConnection:
    """A new autocommit connection to ``url``.

    Raises:
        sqlite3.OperationalError: the server cannot be reached or refused the login.
    """
    try:
        params = {**KEEPALIVES, **conninfo_to_dict(url), "application_name": application_name}
        conn = psycopg.connect(**params, autocommit=True)
    except psycopg.Error as exc:
        raise _as_sqlite_error(exc) from exc
    return PgConnection(conn)
