"""``talon migrate --to``: copy a SQLite store into an empty PostgreSQL database.

Tables are copied in the order SQLite created them (so a row's references exist before it),
each in primary-key order, keeping every id, in one PostgreSQL transaction: a failed copy
leaves the target as empty as it was. The full-text index is not copied: PostgreSQL's
triggers rebuild it from the rows it indexes. Identity sequences then continue after the
copied ids, and every table's row count is compared before the commit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gateway.errors import RefusedError
from gateway.store.db import code_schema_version
from gateway.store.pg_connection import PgConnection

__all__ = ["CopyError", "TableCopy", "copy_sqlite_to_postgres", "open_source"]

BATCH = 1000
# SQLite's own tables and the FTS5 index with its shadow tables (rebuilt by triggers).
_SKIPPED_PREFIXES = ("sqlite_", "memory_fts")


class CopyError(RefusedError):
    """The copy cannot start or did not match; nothing was committed."""


@dataclass(frozen=True, slots=True)
class TableCopy:
    table: str
    rows: int


def open_source(path: Path) -> sqlite3.Connection:
    """The SQLite store at ``path``, read-only, at the schema version of this Talon.

    Raises:
        CopyError: no such file, or its schema is not this Talon's (run ``talon migrate``).
    """
    if not path.is_file():
        raise CopyError(f"no database at {path}")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version != code_schema_version():
        conn.close()
        raise CopyError(
            f"{path} is at schema version {version}, this Talon at {code_schema_version()}; "
            "run `talon migrate` (without --to) first"
        )
    return conn


def _tables(source: sqlite3.Connection) -> list[str]:
    rows = source.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid").fetchall()
    return [name for (name,) in rows if not name.startswith(_SKIPPED_PREFIXES)]


def _columns(target: PgConnection, table: str) -> list[str]:
    """The target's columns that take a copied value (not generated, not ALWAYS identities)."""
    rows = target.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = ? AND is_generated = 'NEVER' AND identity_generation IS DISTINCT FROM 'ALWAYS' "
        "ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    return [r[0] for r in rows]


def _order_by(source: sqlite3.Connection, table: str) -> str:
    keys = [r[1] for r in sorted(source.execute(f'PRAGMA table_info("{table}")'), key=lambda r: r[5]) if r[5]]
    return ", ".join(f'"{k}"' for k in keys) or "rowid"


def _count(conn: sqlite3.Connection | PgConnection, table: str) -> int:
    row = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()
    return int(row[0]) if row else 0


def _copy_table(source: sqlite3.Connection, target: PgConnection, table: str) -> int:
    source_columns = {r[1] for r in source.execute(f'PRAGMA table_info("{table}")')}
    columns = [c for c in _columns(target, table) if c in source_columns]
    if not columns:
        raise CopyError(f"table {table} is missing from the PostgreSQL schema")
    names = ", ".join(f'"{c}"' for c in columns)
    insert = f'INSERT INTO "{table}" ({names}) VALUES ({", ".join("?" * len(columns))})'
    cursor = source.execute(f'SELECT {names} FROM "{table}" ORDER BY {_order_by(source, table)}')
    copied = 0
    while batch := cursor.fetchmany(BATCH):
        target.executemany(insert, batch, pipelined=True)
        copied += len(batch)
    return copied


def _continue_identities(target: PgConnection) -> None:
    rows = target.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND is_identity = 'YES'"
    ).fetchall()
    for table, column in rows:
        target.execute(
            f'SELECT setval(pg_get_serial_sequence(?, ?), COALESCE(MAX("{column}"), 1), '
            f'MAX("{column}") IS NOT NULL) FROM "{table}"',
            (f'"{table}"', column),
        )


def copy_sqlite_to_postgres(
    source: sqlite3.Connection, target: PgConnection, progress: Callable[[TableCopy], None]
) -> list[TableCopy]:
    """Copy every table of ``source`` into ``target`` (migrated, empty) in one transaction.

    Raises:
        CopyError: ``target`` holds rows already, or a count differs after the copy.
    """
    tables = _tables(source)
    target.execute("BEGIN")
    try:
        filled = [t for t in tables if _count(target, t)]
        if filled:
            raise CopyError(
                f"the PostgreSQL database is not empty ({', '.join(filled[:5])} have rows); "
                "copy into a new, empty database"
            )
        copies = []
        for table in tables:
            copy = TableCopy(table, _copy_table(source, target, table))
            progress(copy)
            copies.append(copy)
        _continue_identities(target)
        for copy in copies:
            if (found := _count(target, copy.table)) != _count(source, copy.table):
                raise CopyError(
                    f"{copy.table}: {found} rows in PostgreSQL, {copy.rows} copied; nothing was kept"
                )
    except BaseException:
        target.rollback()
        raise
    target.commit()
    return copies
