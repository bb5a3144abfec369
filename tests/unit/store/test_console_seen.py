"""What a console thread's windows have not shown yet (gateway/store/console.py)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from connectors.base import RenderedChunk, ThreadKey
from gateway.store.console import mark_seen, unseen_rows
from gateway.store.db import Database, open_database
from gateway.store.outbox import ThreadAddress, enqueue_chunks, finish_row
from gateway.store.threads import upsert_thread

KEY = ThreadKey("console", "main", None)
OTHER = ThreadKey("console", "other", None)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    yield database
    await database.close()


async def post(db: Database, key: ThreadKey, *texts: str, sent: bool = True) -> list[int]:
    def commit(conn: sqlite3.Connection) -> list[int]:
        thread = upsert_thread(conn, key, chat_type="dm", persona="assistant", now=time.time())
        chunks = [RenderedChunk(t, t, "markdown") for t in texts]
        ids = enqueue_chunks(conn, ThreadAddress(thread.id, key), chunks)
        for row_id in ids if sent else ():
            finish_row(conn, row_id, "sent", platform_message_id=str(row_id), error=None, now=time.time())
        return ids

    return await db.run_transaction(commit)


async def test_a_new_thread_has_everything_unseen_until_a_window_confirms(db: Database) -> None:
    first, second = await post(db, KEY, "one", "two")
    await post(db, OTHER, "elsewhere")
    found = await db.read(unseen_rows, KEY, 10)
    assert [(r.id, r.text) for r in found.rows] == [(first, "one"), (second, "two")]
    await db.run_transaction(mark_seen, KEY, first)
    assert [r.text for r in (await db.read(unseen_rows, KEY, 10)).rows] == ["two"]
    await db.run_transaction(mark_seen, KEY, second)
    await db.run_transaction(mark_seen, KEY, first)  # a late confirmation never moves back
    assert (await db.read(unseen_rows, KEY, 10)).rows == []
    assert [r.text for r in (await db.read(unseen_rows, OTHER, 10)).rows] == ["elsewhere"]


async def test_rows_still_being_delivered_count_and_the_newest_are_kept_within_the_limit(
    db: Database,
) -> None:
    await post(db, KEY, *[f"old {n}" for n in range(5)])
    await post(db, KEY, "pending", sent=False)
    found = await db.read(unseen_rows, KEY, 3)
    assert [r.text for r in found.rows] == ["old 3", "old 4", "pending"]
    assert found.left_out == 3


async def test_an_unknown_thread_has_nothing_and_confirming_it_changes_nothing(db: Database) -> None:
    await db.run_transaction(mark_seen, ThreadKey("console", "never", None), 99)
    found = await db.read(unseen_rows, ThreadKey("console", "never", None), 10)
    assert (found.rows, found.left_out) == ([], 0)
