"""One-statement reads and writes for tests that seed or inspect the store directly.

They go through the store's own seams (`Database.read` and `Database.run_transaction`), so a
test sees the same snapshots and commits as the code under test.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gateway.store.db import Database
from gateway.store.nodes import lock_key, register_node, try_lock


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


async def cluster_node(url: str, path: Path, name: str) -> Database:
    """The PostgreSQL database at ``url`` opened as the cluster node ``name``, as
    ``ClusterNode.join`` would: its node lock held, its row registered (``path`` is its data dir)."""
    from gateway.store.postgres import open_postgres  # psycopg, for the tests that use PostgreSQL

    await asyncio.to_thread(path.mkdir, parents=True, exist_ok=True)
    db = await open_postgres(url, path, node=True, cluster=True)
    key = lock_key(f"node:{name}")
    assert await db.on_writer_session(try_lock, key)
    await db.run_transaction(register_node, name, host="h", pid=1, version="t", key=key, now=time.time())
    return db
