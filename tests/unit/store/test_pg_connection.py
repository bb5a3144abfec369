"""The psycopg connection the store's functions take on PostgreSQL reads SQL as sqlite3 does."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest

from gateway.store.db import DatabaseUnreachableError
from gateway.store.pg_connection import ROWS_PER_INSERT, PgConnection, connect, multi_row, translate
from tests.pg_server import PgServer


def test_placeholders_are_numbered_and_quoted_text_is_left_alone() -> None:
    assert translate("SELECT a FROM t WHERE b = ? AND c LIKE '?%' AND \"d?\" = ?") == (
        "SELECT a FROM t WHERE b = $1 AND c LIKE '?%' AND \"d?\" = $2"
    )


def test_literal_percent_and_question_marks_reach_the_server_as_written(pg_server: PgServer) -> None:
    conn = connect(pg_server.url(), application_name="test")
    try:
        assert conn.execute("SELECT '50%', 'a?b'").fetchone() == ("50%", "a?b")
        assert conn.execute("SELECT '50%' AS share, ? AS n", (7,)).fetchone()["share"] == "50%"
        row = conn.execute("SELECT 1 AS one, 'x' AS name").fetchone()
        assert row is not None and (row[0], row["name"], row.keys()) == (1, "x", ["one", "name"])
        assert conn.execute("CREATE TEMP TABLE t (k INT PRIMARY KEY)").fetchone() is None
        conn.execute("INSERT INTO t VALUES (?)", (1,))
        with pytest.raises(sqlite3.IntegrityError, match="duplicate key"):
            conn.execute("INSERT INTO t VALUES (?)", (1,))
    finally:
        conn.close()


def test_an_insert_of_many_rows_is_one_statement_per_batch() -> None:
    query = multi_row("INSERT INTO t (a, b, n) VALUES (?, ?, 1) ON CONFLICT (a) DO NOTHING", 3)
    assert query is not None and translate(query) == (
        "INSERT INTO t (a, b, n) VALUES ($1, $2, 1), ($3, $4, 1), ($5, $6, 1) ON CONFLICT (a) DO NOTHING"
    )
    assert multi_row("DELETE FROM t WHERE a = ?", 2) is None
    assert multi_row("INSERT INTO t (a) VALUES (lower(?))", 2) is None  # nested: left alone
    assert multi_row("INSERT INTO t (a) VALUES ('(?)')", 2) is None  # quoted: left alone


def test_executemany_stores_every_row_in_order_and_counts_them(pg_server: PgServer) -> None:
    conn = connect(pg_server.url(), application_name="test")
    rows = [(i, f"row {i}") for i in range(ROWS_PER_INSERT * 2 + 7)]
    try:
        conn.execute("CREATE TEMP TABLE m (id BIGSERIAL PRIMARY KEY, k INT UNIQUE, v TEXT)")
        cursor = conn.executemany("INSERT INTO m (k, v) VALUES (?, ?) ON CONFLICT (k) DO NOTHING", rows)
        assert cursor.rowcount == len(rows)
        again = conn.executemany("INSERT INTO m (k, v) VALUES (?, ?) ON CONFLICT (k) DO NOTHING", rows[:5])
        assert again.rowcount == 0
        stored = conn.execute("SELECT k, v FROM m ORDER BY id").fetchall()
        assert [tuple(r) for r in stored] == rows
        with pytest.raises(sqlite3.IntegrityError, match="duplicate key"):
            conn.executemany("INSERT INTO m (k, v) VALUES (?, ?)", [(len(rows), "new"), (0, "taken")])
    finally:
        conn.close()


def test_a_statement_run_again_gives_the_same_answers_whatever_its_values(pg_server: PgServer) -> None:
    """From its second run a statement is prepared, once per mix of parameter types."""
    conn = connect(pg_server.url(), application_name="test")
    try:
        conn.execute("CREATE TEMP TABLE v (id BIGSERIAL PRIMARY KEY, n BIGINT, s TEXT)")
        values = [(1, "a"), (2**40, "b"), (None, "c"), (7, None), (-(2**62), "é ✓")] * 3
        ids = [
            conn.execute("INSERT INTO v (n, s) VALUES (?, ?) RETURNING id", row).fetchone()[0]
            for row in values
        ]
        assert len(set(ids)) == len(values)
        for id_, row in zip(ids, values, strict=True):
            assert tuple(conn.execute("SELECT n, s FROM v WHERE id = ?", (id_,)).fetchone()) == row
        assert conn.execute("UPDATE v SET s = ? WHERE n IS NULL", ("none",)).rowcount == 3
        assert conn.execute("SELECT n FROM v WHERE id = ?", (-1,)).fetchone() is None
    finally:
        conn.close()


def test_a_prepared_statement_that_fails_leaves_the_connection_usable(pg_server: PgServer) -> None:
    conn = connect(pg_server.url(), application_name="test")
    try:
        conn.execute("CREATE TEMP TABLE u (k INT PRIMARY KEY)")
        for k in range(3):  # prepared from the second
            conn.execute("INSERT INTO u VALUES (?)", (k,))
        with pytest.raises(sqlite3.IntegrityError, match="duplicate key"):
            conn.execute("INSERT INTO u VALUES (?)", (1,))
        conn.execute("BEGIN")
        conn.execute("INSERT INTO u VALUES (?)", (3,))  # prepared before, still there
        conn.commit()
        assert [r[0] for r in conn.execute("SELECT k FROM u ORDER BY k").fetchall()] == [0, 1, 2, 3]
        with pytest.raises(sqlite3.DatabaseError, match="syntax"):
            conn.execute("SELEC ?", (1,))
    finally:
        conn.close()


def test_a_transactions_statements_are_read_when_looked_at_or_at_commit(pg_server: PgServer) -> None:
    conn = connect(pg_server.url(), application_name="test")
    try:
        conn.execute("CREATE TEMP TABLE w (k INT PRIMARY KEY, v TEXT)")
        conn.execute("BEGIN")
        for k in range(5):  # nobody reads these: no wait for each
            conn.execute("INSERT INTO w VALUES (?, ?)", (k, f"v{k}"))
        assert conn.execute("UPDATE w SET v = ? WHERE k < ?", ("low", 2)).rowcount == 2
        assert conn.execute("SELECT count(*) FROM w WHERE v = ?", ("low",)).fetchone()[0] == 2
        assert conn.in_transaction
        conn.commit()
        assert not conn.in_transaction
        assert conn.execute("SELECT count(*) FROM w").fetchone()[0] == 5

        conn.execute("BEGIN")
        conn.execute("INSERT INTO w VALUES (?, ?)", (10, "new"))
        duplicate = conn.execute("INSERT INTO w VALUES (?, ?)", (0, "taken"))  # fails, unread
        after = conn.execute("INSERT INTO w VALUES (?, ?)", (11, "after"))
        with pytest.raises(sqlite3.IntegrityError, match="duplicate key"):
            after.rowcount  # noqa: B018 - the first failure of the transaction is raised here
        with pytest.raises(sqlite3.IntegrityError, match="duplicate key"):
            duplicate.fetchall()
        with pytest.raises(sqlite3.IntegrityError, match="duplicate key"):
            conn.commit()
        assert conn.in_transaction  # aborted: a rollback ends it
        conn.rollback()
        assert not conn.in_transaction
        assert conn.execute("SELECT count(*) FROM w").fetchone()[0] == 5  # nothing of it stored

        conn.execute("BEGIN")
        conn.execute("INSERT INTO w VALUES (?, ?)", (0, "taken"))  # unread until the commit
        with pytest.raises(sqlite3.IntegrityError, match="duplicate key"):
            conn.commit()
        conn.rollback()
        conn.execute("SELECT v FROM w WHERE k = ?", (1,))  # seen once: prepared at its next run
        conn.execute("BEGIN")
        conn.execute("INSERT INTO w VALUES (?, ?)", (0, "taken"))
        conn.execute("SELECT v FROM w WHERE k = ?", (1,))  # its PREPARE is aborted with it
        conn.rollback()
        assert conn.execute("SELECT v FROM w WHERE k = ?", (1,)).fetchone()[0] == "low"  # prepared anew
        conn.execute("BEGIN")
        conn.execute("INSERT INTO w VALUES (?, ?)", (12, "x"))
        conn.rollback()  # never read: rolled back all the same
        assert conn.execute("SELECT count(*) FROM w WHERE k = ?", (12,)).fetchone()[0] == 0
    finally:
        conn.close()


def test_a_connection_the_server_dropped_raises_an_operational_error(pg_server: PgServer) -> None:
    conn = connect(pg_server.url(), application_name="dropped")
    admin = connect(pg_server.url(), application_name="admin")
    try:
        conn.execute("SET statement_timeout = 50")
        with pytest.raises(sqlite3.OperationalError, match="statement timeout") as timed_out:
            conn.execute("SELECT pg_sleep(?)", (1,))
        assert not isinstance(timed_out.value, DatabaseUnreachableError)  # the connection is fine
        conn.execute("SET statement_timeout = 0")
        pid = conn.execute("SELECT pg_backend_pid() + ?", (0,)).fetchone()[0]
        conn.execute("BEGIN")
        pending = conn.execute("SELECT pg_backend_pid() + ?", (0,))
        admin.execute("SELECT pg_terminate_backend(?)", (pid,))
        with pytest.raises(DatabaseUnreachableError):  # transient: loops retry, logging one line
            conn.execute("SELECT pg_sleep(0.1)").fetchall()  # the pipeline's read breaks off
        with pytest.raises(sqlite3.OperationalError):
            pending.fetchone()
        with pytest.raises(sqlite3.OperationalError):
            conn.commit()
        with pytest.raises(sqlite3.OperationalError):
            conn.execute("SELECT pg_backend_pid() + ?", (0,))
        with pytest.raises(sqlite3.OperationalError):  # never psycopg's own error
            conn.execute("BEGIN")
            conn.execute("SELECT 1").fetchall()
        conn.rollback()  # what a caller does next: nothing to roll back, and no error either
    finally:
        conn.close()
        admin.close()


def _plan(conn: PgConnection, query: str) -> dict[str, Any]:
    row = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {query}").fetchone()
    assert row is not None
    plan = row[0]
    return (json.loads(plan) if isinstance(plan, str) else plan)[0]


def test_a_plan_priced_past_the_jit_threshold_is_not_compiled(pg_server: PgServer) -> None:
    # A cluster node prices sequential scans out; with JIT on, every such statement compiled
    # for 50-350 ms. The URL's own options still apply, and may turn JIT back on.
    url = pg_server.url()
    query = "SELECT count(*) FROM j WHERE v > 0"  # j has no index: a sequential scan
    conn = connect(url, application_name="test")
    opted_in = connect(f"{url}?options=-c%20jit%3Don%20-c%20work_mem%3D1234kB", application_name="test")
    try:
        for c in (conn, opted_in):
            c.script("CREATE TEMP TABLE j (v INT); SET enable_seqscan = off")
        assert "JIT" not in _plan(conn, query)
        assert "JIT" in _plan(opted_in, query)
        assert opted_in.execute("SHOW work_mem").fetchone() == ("1234kB",)
    finally:
        conn.close()
        opted_in.close()


def test_a_statement_reads_its_columns_by_name_after_a_migration_renames_them(pg_server: PgServer) -> None:
    conn = connect(pg_server.url(), application_name="test")
    try:
        conn.script("CREATE TEMP TABLE r (a INT)")
        conn.execute("INSERT INTO r VALUES (?)", (1,))
        assert conn.execute("SELECT * FROM r").fetchone()["a"] == 1
        conn.script("ALTER TABLE r RENAME COLUMN a TO b")
        assert conn.execute("SELECT * FROM r").fetchone()["b"] == 1
    finally:
        conn.close()
