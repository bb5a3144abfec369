"""A psycopg connection shaped like the ``sqlite3.Connection`` the store's functions take.

The table-group functions are written once, in SQL both engines accept (``ON CONFLICT``,
``RETURNING``, no engine functions). What differs below the SQL is covered here, so they
need no second copy:

- placeholders: the store writes ``?``; psycopg wants ``%s`` (and a literal ``%`` doubled);
- rows: read by index and by column name, as ``sqlite3.Row`` reads;
- errors: PostgreSQL's are raised as ``sqlite3``'s classes (the psycopg error is the cause),
  so a caller catches one set of exceptions whichever engine refused; a serialization
  failure or deadlock is :class:`~gateway.store.db.WriteConflictError`, which reruns the
  transaction.

The connection is in autocommit mode, as the store's SQLite connections are: the store opens
its transactions itself (``BEGIN``, ``COMMIT``).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import RowMaker

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


def _row_factory(cursor: psycopg.Cursor[Any]) -> RowMaker[PgRow]:
    # The names straight from the result: ``cursor.description`` builds a Column object per
    # column of every statement.
    result = cursor.pgresult
    names = tuple((result.fname(i) or b"").decode() for i in range(result.nfields)) if result else ()
    cls = _row_class(names)
    return lambda values: cls(values)


def _has_rows(cursor: psycopg.Cursor[Any]) -> bool:
    result = cursor.pgresult
    return result is not None and result.status == psycopg.pq.ExecStatus.TUPLES_OK


@lru_cache(maxsize=2048)
def translate(sql: str) -> str:
    """``sql`` with ``?`` placeholders as psycopg's ``%s`` and literal ``%`` doubled.

    Quoted strings and identifiers are copied as they are, but for their ``%``.
    """
    out: list[str] = []
    quote = ""
    for ch in sql:
        if ch == "%":
            out.append("%%")
            continue
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "?":
            out.append("%s")
            continue
        out.append(ch)
    return "".join(out)


def _as_sqlite_error(exc: psycopg.Error) -> sqlite3.Error:
    if isinstance(exc, psycopg.errors.SerializationFailure | psycopg.errors.DeadlockDetected):
        return WriteConflictError(str(exc))
    if isinstance(exc, psycopg.IntegrityError):
        return sqlite3.IntegrityError(str(exc))
    if isinstance(exc, psycopg.OperationalError):
        return sqlite3.OperationalError(str(exc))
    return sqlite3.DatabaseError(str(exc))


ROWS_PER_INSERT = 200  # rows of one multi-row INSERT: far below PostgreSQL's 65,535 parameters

# The one VALUES tuple of a translated INSERT: placeholders and plain words, nothing nested or quoted.
_VALUES = re.compile(r"\bVALUES\s*(\((?:[^()'\"]|%s)*\))", re.IGNORECASE)


@lru_cache(maxsize=512)
def _insert_parts(query: str) -> tuple[str, str, str] | None:
    """(before, the VALUES tuple, after) of a translated ``INSERT ... VALUES (...)`` with one
    plain tuple; None for any other statement."""
    if not query.lstrip()[:6].upper() == "INSERT":
        return None
    found = list(_VALUES.finditer(query))
    if len(found) != 1:
        return None
    match = found[0]
    return query[: match.start(1)], match.group(1), query[match.end(1) :]


def multi_row(query: str, rows: int) -> str | None:
    """``query`` (translated) inserting ``rows`` rows in one statement, or None when it is not
    an ``INSERT ... VALUES (...)`` with one plain tuple."""
    parts = _insert_parts(query)
    return None if parts is None else _repeat(parts, rows)


def _repeat(parts: tuple[str, str, str], rows: int) -> str:
    before, one, after = parts
    return before + ", ".join([one] * rows) + after


class PgCursor:
    """The result of one statement: ``fetchone``, ``fetchall``, ``rowcount`` and iteration."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: psycopg.Cursor[PgRow]) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def fetchone(self) -> PgRow | None:
        if not _has_rows(self._cursor):
            return None
        return self._cursor.fetchone()

    def fetchall(self) -> list[PgRow]:
        if not _has_rows(self._cursor):
            return []
        return self._cursor.fetchall()

    def __iter__(self) -> Iterator[PgRow]:
        return iter(self.fetchall())

    def close(self) -> None:
        self._cursor.close()


class _Counted(PgCursor):
    """A cursor whose ``rowcount`` is the sum over the statements that made it."""

    __slots__ = ("_count",)

    def __init__(self, cursor: psycopg.Cursor[PgRow], count: int) -> None:
        super().__init__(cursor)
        self._count = count

    @property
    def rowcount(self) -> int:
        return self._count


class PgConnection:
    """The part of ``sqlite3.Connection`` the store uses, over one psycopg connection."""

    dialect = "postgresql"

    def __init__(self, conn: psycopg.Connection[PgRow]) -> None:
        self._conn = conn

    @property
    def in_transaction(self) -> bool:
        return self._conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PgCursor:
        cursor = self._conn.cursor()
        try:
            cursor.execute(translate(sql), tuple(params) if params else ())
        except psycopg.Error as exc:
            raise _as_sqlite_error(exc) from exc
        return PgCursor(cursor)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]], *, pipelined: bool = False) -> PgCursor:
        """``sql`` once per row. An ``INSERT ... VALUES (...)`` runs as one statement of many
        rows (:func:`multi_row`), up to :data:`ROWS_PER_INSERT` at a time: a reply's trace
        events and usage rollups are a dozen rows, each a round trip otherwise. Its rows must
        not upsert one key twice, which PostgreSQL refuses within one statement. Other
        statements run one at a time unless ``pipelined`` (psycopg's executemany, one round
        trip): a pipeline that a conflict with another node aborted logs a warning as psycopg
        tears it down, though the conflict only means the transaction runs again. A bulk copy
        pipelines."""
        cursor = self._conn.cursor()
        query = translate(sql)
        values = [tuple(r) for r in rows]
        try:
            if pipelined:
                cursor.executemany(query, values)
            elif len(values) > 1 and (parts := _insert_parts(query)) is not None:
                count = 0
                for start in range(0, len(values), ROWS_PER_INSERT):
                    part = values[start : start + ROWS_PER_INSERT]
                    cursor.execute(_repeat(parts, len(part)), [v for row in part for v in row])
                    count += max(cursor.rowcount, 0)
                return _Counted(cursor, count)
            else:
                for row in values:
                    cursor.execute(query, row)
        except psycopg.Error as exc:
            raise _as_sqlite_error(exc) from exc
        return PgCursor(cursor)

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
        conn = psycopg.connect(**params, autocommit=True, row_factory=_row_factory)
    except psycopg.Error as exc:
        raise _as_sqlite_error(exc) from exc
    return PgConnection(conn)
