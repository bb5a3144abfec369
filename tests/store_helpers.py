"""One-statement reads and writes for tests that seed or inspect the store directly.

They go through the store's own seams (`Database.read` and `Database.run_transaction`), so a
test sees the same snapshots and commits as the code under test.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from gateway.store.db import Database


async def fetch_rows(db: Database, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
    """Every row of one query, read in one snapshot."""
    values = tuple(params)
    return await db.read(lambda conn: conn.execute(sql, values).fetchall())


async def fetch_row(db: Database, sql: str, params: Iterable[Any] = ()) -> sqlite3.Row | None:
    """The first row of one query, or None when it returns none."""
    rows = await fetch_rows(db, sql, params)
    return rows[0] if rows else None


async def execute_sql(db: Database, sql: str, params: Iterable[Any] = ()) -> int:
    """One statement in its own transaction; returns the number of rows it changed."""
    values = tuple(params)
    return await db.run_transaction(lambda conn: conn.execute(sql, values).rowcount)
