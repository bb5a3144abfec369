"""The store's write path: group commit and WAL housekeeping."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.store.db import Database, _statements, code_schema_version, migrations, open_database
from gateway.store.postgres import pg_migrations
from gateway.store.usage import UsageTotals, rollup_totals
from tests.store_helpers import fetch_rows


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    await database.run_transaction(
        lambda conn: conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body)")
    )
    yield database
    await database.close()


def insert(body: object, conn: sqlite3.Connection) -> int:
    (row_id,) = conn.execute("INSERT INTO notes (body) VALUES (?) RETURNING id", (body,)).fetchone()
    return int(row_id)


def insert_then_fail(body: object, conn: sqlite3.Connection) -> int:
    insert(body, conn)
    raise ValueError(f"refusing {body}")


async def bodies(db: Database) -> list[object]:
    return [row["body"] for row in await fetch_rows(db, "SELECT body FROM notes ORDER BY id")]


async def test_concurrent_transactions_each_get_their_own_result(db: Database) -> None:
    ids = await asyncio.gather(
        *(db.run_transaction(lambda conn, n=n: insert(f"n{n}", conn)) for n in range(200))
    )
    assert len(set(ids)) == 200
    rows = {row["id"]: row["body"] for row in await fetch_rows(db, "SELECT id, body FROM notes")}
    assert [rows[i] for i in ids] == [f"n{n}" for n in range(200)]


async def test_a_failing_transaction_is_rolled_back_alone(db: Database) -> None:
    def work(n: int, conn: sqlite3.Connection) -> int:
        return insert_then_fail(n, conn) if n % 7 == 3 else insert(n, conn)

    outcomes = await asyncio.gather(
        *(db.run_transaction(lambda conn, n=n: work(n, conn)) for n in range(50)), return_exceptions=True
    )
    failed = [n for n, outcome in enumerate(outcomes) if isinstance(outcome, ValueError)]
    assert failed == [n for n in range(50) if n % 7 == 3]
    assert str(outcomes[3]) == "refusing 3"
    assert await bodies(db) == [n for n in range(50) if n % 7 != 3]


async def test_a_lone_failing_transaction_leaves_nothing_behind(db: Database) -> None:
    with pytest.raises(ValueError, match="refusing lonely"):
        await db.run_transaction(lambda conn: insert_then_fail("lonely", conn))
    assert await bodies(db) == []
    assert await db.run_transaction(lambda conn: insert("after", conn)) == 1
    assert await bodies(db) == ["after"]


async def test_a_result_may_itself_be_an_exception_object(db: Database) -> None:
    error = ValueError("just a value")
    assert await db.run_transaction(lambda conn: error) is error


def wal_salt(wal: Path) -> bytes:
    """The WAL header's salt, which SQLite changes each time it starts the WAL over."""
    with wal.open("rb") as f:
        return f.read(24)[16:24]


async def test_the_wal_starts_over_while_writes_never_pause(db: Database) -> None:
    """A PASSIVE checkpoint never finishes while commits keep arriving, and SQLite only
    reuses a WAL from its start once one has: without help the file grows without end."""
    blob = b"x" * 16_000
    wal = db.path.with_name(db.path.name + "-wal")
    await db.run_transaction(lambda conn: conn.execute("INSERT INTO notes (body) VALUES (?)", (blob,)))
    first_salt = wal_salt(wal)
    restarted = False
    for n in range(20_000):
        await db.run_transaction(lambda conn: conn.execute("INSERT INTO notes (body) VALUES (?)", (blob,)))
        if n % 20 == 0:
            await db.run_transaction(lambda conn: conn.execute("DELETE FROM notes"))
        if n % 100 == 0 and wal_salt(wal) != first_salt:
            restarted = True
            break
    assert restarted, "the WAL was never started over"


async def test_a_turns_reads_use_indexes_whatever_the_history(db: Database) -> None:
    """The reads every reply makes walk an index; none scans a table or sorts a thread's
    whole history, so a long-lived chat answers as fast as a new one."""
    from gateway.outbox import next_pending
    from gateway.turn_start import load_context

    def setup(conn: sqlite3.Connection) -> None:
        conn.execute(
            "INSERT INTO threads (id, channel, chat_id, topic, chat_type, created_at, updated_at) "
            "VALUES (1, 'console', 'main', '', 'dm', 0, 0)"
        )

    await db.run_transaction(setup)
    statements: list[str] = []

    def hot_reads(conn: sqlite3.Connection) -> list[list[str]]:
        conn.set_trace_callback(statements.append)
        try:
            load_context(1, 10, conn)
            next_pending(conn, 1)
        finally:
            conn.set_trace_callback(None)
        selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
        return [[row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + s)] for s in selects]

    plans = await db.read(hot_reads)
    assert len(plans) == 4  # thread, summary, transcript, next outbox row
    for plan in plans:
        assert not any(step.startswith("SCAN") or "TEMP B-TREE" in step for step in plan), plan


async def test_the_start_up_read_of_staged_files_reads_only_their_index(db: Database) -> None:
    """Finishing interrupted file moves at start walks a partial index that holds only the
    messages still marked ``staged``, not every message ever received."""
    from gateway.store.messages import messages_with_staged_files

    statements: list[str] = []

    def plan(conn: sqlite3.Connection) -> list[str]:
        conn.set_trace_callback(statements.append)
        try:
            messages_with_staged_files(conn)
        finally:
            conn.set_trace_callback(None)
        (select,) = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
        return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + select)]

    assert await db.read(plan) == ["SCAN messages USING INDEX messages_with_staged_files"]


def test_every_schema_version_has_a_postgresql_migration() -> None:
    """A PostgreSQL database must reach the version the code expects: each SQLite migration
    after the baseline needs its PostgreSQL twin of the same number."""
    pg_versions = [v for v, _, _ in pg_migrations()]
    baseline = pg_versions[0]
    later = [v for v, _, _ in migrations() if v > baseline]
    assert pg_versions[1:] == later
    assert pg_versions[-1] == code_schema_version()


async def test_the_usage_rollups_keep_their_totals_when_they_get_shards(tmp_path: Path) -> None:
    path = tmp_path / "talon.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for version, _, sql in migrations():
        if version > 28:
            break
        for statement in _statements(sql):
            conn.execute(statement)
    conn.execute(
        "INSERT INTO usage_rollups (scope, subject, period, tokens, cost, runs, unpriced) "
        "VALUES ('persona', 'p', '2026-12', 120, 0.25, 3, 1)"
    )
    conn.execute("PRAGMA user_version=28")
    conn.close()

    database = await open_database(path)  # migration 0029: the shards
    try:
        [totals] = await database.read(rollup_totals, [("persona", "p", "2026-12")])
    finally:
        await database.close()
    assert totals == UsageTotals(tokens=120, cost=0.25, runs=3, unpriced=1)
