"""The psycopg connection the store's functions take on PostgreSQL reads SQL as sqlite3 does."""

from __future__ import annotations

import sqlite3

import pytest

from gateway.store.pg_connection import ROWS_PER_INSERT, connect, multi_row, translate
from tests.pg_server import PgServer


def test_placeholders_become_psycopgs_and_quoted_text_is_left_alone() -> None:
    assert translate("SELECT a FROM t WHERE b = ? AND c LIKE '?%' AND d = ?") == (
        "SELECT a FROM t WHERE b = %s AND c LIKE '?%%' AND d = %s"
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
    query = translate("INSERT INTO t (a, b, n) VALUES (?, ?, 1) ON CONFLICT (a) DO NOTHING")
    assert multi_row(query, 3) == (
        "INSERT INTO t (a, b, n) VALUES (%s, %s, 1), (%s, %s, 1), (%s, %s, 1) ON CONFLICT (a) DO NOTHING"
    )
    assert multi_row(translate("DELETE FROM t WHERE a = ?"), 2) is None
    assert multi_row(translate("INSERT INTO t (a) VALUES (lower(?))"), 2) is None  # nested: left alone
    assert multi_row(translate("INSERT INTO t (a) VALUES ('(?)')"), 2) is None  # quoted: left alone


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
