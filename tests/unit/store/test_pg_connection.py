"""The psycopg connection the store's functions take on PostgreSQL reads SQL as sqlite3 does."""

from __future__ import annotations

import sqlite3

import pytest

from gateway.store.pg_connection import connect, translate
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
