"""On PostgreSQL, a group of keyed writes waits on the server about as often as its longest
member, not as often as all of them together (gateway/store/pg_interleave.py)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from gateway.store import pg_pipeline
from gateway.store.postgres import open_postgres
from tests.pg_server import PgServer


def _three_reads(conn: sqlite3.Connection, chat: str) -> int:
    """Three statements, each needing the one before it's result."""
    thread_id = conn.execute(
        "INSERT INTO threads (channel, chat_id, topic, chat_type, created_at, updated_at) "
        "VALUES ('tg', ?, '', 'dm', 0, 0) RETURNING id",
        (chat,),
    ).fetchone()[0]
    row = conn.execute("SELECT chat_id FROM threads WHERE id = ?", (thread_id,)).fetchone()
    return int(conn.execute("SELECT count(*) FROM threads WHERE chat_id = ?", (row[0],)).fetchone()[0])


async def test_a_group_of_keyed_writes_waits_about_as_often_as_one_of_them(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = await open_postgres(pg_server.new_database(), tmp_path)
    waits = 0
    wait = pg_pipeline._wait

    def counted(pg: object, events: int) -> None:  # the writer blocked until the server answered
        nonlocal waits
        waits += 1
        wait(pg, events)  # type: ignore[arg-type]

    try:
        monkeypatch.setattr(pg_pipeline, "_wait", counted)
        keyed = await asyncio.gather(*(db.run_keyed(("chat", c), _three_reads, f"k{c}") for c in range(20)))
        keyed_waits, waits = waits, 0
        unkeyed = await asyncio.gather(*(db.run_transaction(_three_reads, f"u{c}") for c in range(20)))
        unkeyed_waits = waits
    finally:
        await db.close()
    assert keyed == unkeyed == [1] * 20
    assert unkeyed_waits >= 50  # one after the other: about three waits each
    assert keyed_waits <= 8  # three rounds for all twenty, and the commit
