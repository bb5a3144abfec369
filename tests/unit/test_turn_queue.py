"""The turn queue keeps serving a thread whose lease failed."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.config import QueueSettings
from gateway.queue import Batch, TurnHandler, TurnQueue, complete_in
from gateway.store.db import Database, open_database
from tests.store_helpers import execute_sql, fetch_rows


class FlakyStart(TurnHandler):
    """Its ``begin`` fails the first ``failures`` times, as a broken read would."""

    def __init__(self, db: Database, failures: int):
        self.db = db
        self.failures = failures
        self.served: asyncio.Queue[Batch] = asyncio.Queue()

    def begin(self, conn: sqlite3.Connection, batch: Batch) -> Any:
        if self.failures:
            self.failures -= 1
            raise sqlite3.OperationalError("disk I/O error")
        return None

    async def run(self, batch: Batch, begun: Any) -> None:
        await self.db.run_transaction(lambda conn: complete_in(conn, batch, None))
        self.served.put_nowait(batch)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    yield database
    await database.close()


async def enqueue(db: Database) -> tuple[int, int]:
    def insert(conn: sqlite3.Connection) -> tuple[int, int]:
        now = time.time()
        (thread_id,) = conn.execute(
            "INSERT INTO threads (channel, chat_id, created_at, updated_at) VALUES ('console', 'c', ?, ?) "
            "RETURNING id",
            (now, now),
        ).fetchone()
        (item_id,) = conn.execute(
            "INSERT INTO queue_items (thread_id, available_at, created_at, updated_at) VALUES (?, ?, ?, ?) "
            "RETURNING id",
            (thread_id, now, now, now),
        ).fetchone()
        return int(thread_id), int(item_id)

    return await db.run_transaction(insert)


async def test_a_failed_lease_is_tried_again_without_new_work(db: Database) -> None:
    handler = FlakyStart(db, failures=2)
    queue = TurnQueue(db, QueueSettings(backoff_base=0.01), handler)
    await queue.start()
    try:
        thread_id, item_id = await enqueue(db)
        queue.notify(thread_id)
        async with asyncio.timeout(10):
            batch = await handler.served.get()
    finally:
        await queue.stop(grace=1)
    assert batch.ids == (item_id,)
    assert handler.failures == 0
    rows = await fetch_rows(db, "SELECT status FROM queue_items WHERE id = ?", (item_id,))
    assert rows[0]["status"] == "done"


async def test_work_pending_behind_a_batch_runs_without_new_notice(db: Database) -> None:
    # A schedule runs alone, so the message queued behind it is leased by a second turn.
    thread_id, schedule_id = await enqueue(db)
    await execute_sql(
        db, "UPDATE queue_items SET kind = 'schedule', payload = '{}' WHERE id = ?", (schedule_id,)
    )
    now = time.time()
    message_id = await db.run_transaction(
        lambda conn: conn.execute(
            "INSERT INTO queue_items (thread_id, available_at, created_at, updated_at) VALUES (?, ?, ?, ?) "
            "RETURNING id",
            (thread_id, now, now, now),
        ).fetchone()[0]
    )
    handler = FlakyStart(db, failures=0)
    queue = TurnQueue(db, QueueSettings(), handler)
    await queue.start()  # finds the thread's pending work and notifies it once
    try:
        async with asyncio.timeout(10):
            batches = [await handler.served.get(), await handler.served.get()]
    finally:
        await queue.stop(grace=1)
    assert [b.ids for b in batches] == [(schedule_id,), (message_id,)]


class SlowStart(TurnHandler):
    """Its ``begin`` takes a while on the database thread, as a lease under load does."""

    def __init__(self, db: Database):
        self.db = db
        self.started = asyncio.Event()
        self.ran: list[Batch] = []
        self.stopped: list[Batch] = []
        self.loop = asyncio.get_running_loop()

    def begin(self, conn: sqlite3.Connection, batch: Batch) -> Any:
        self.loop.call_soon_threadsafe(self.started.set)
        time.sleep(0.3)
        return None

    async def run(self, batch: Batch, begun: Any) -> None:
        self.ran.append(batch)
        await self.db.run_transaction(lambda conn: complete_in(conn, batch, None))

    async def gave_up(
        self, batch: Batch, error: str, *, canceled: bool, failure: BaseException | None = None
    ) -> None:
        if canceled:
            self.stopped.append(batch)


async def test_stop_while_the_turn_is_being_leased_ends_that_turn_and_leaves_nothing_stuck(
    db: Database,
) -> None:
    handler = SlowStart(db)
    queue = TurnQueue(db, QueueSettings(backoff_base=0.01), handler)
    await queue.start()
    try:
        thread_id, item_id = await enqueue(db)
        queue.notify(thread_id)
        async with asyncio.timeout(10):
            await handler.started.wait()
            assert queue.cancel(thread_id)  # the lease is still on the database thread
            while queue.busy(thread_id):
                await asyncio.sleep(0.01)
        rows = await fetch_rows(db, "SELECT status FROM queue_items WHERE id = ?", (item_id,))
        assert rows[0]["status"] == "canceled"
        assert [b.ids for b in handler.stopped] == [(item_id,)]
        assert handler.ran == []

        # The stop was for that turn only: the thread's next message is answered.
        def insert(conn: sqlite3.Connection) -> int:
            now = time.time()
            (next_id,) = conn.execute(
                "INSERT INTO queue_items (thread_id, available_at, created_at, updated_at) "
                "VALUES (?, ?, ?, ?) RETURNING id",
                (thread_id, now, now, now),
            ).fetchone()
            return int(next_id)

        next_id = await db.run_transaction(insert)
        queue.notify(thread_id)
        async with asyncio.timeout(10):
            while not handler.ran:
                await asyncio.sleep(0.01)
        assert handler.ran[0].ids == (next_id,)
    finally:
        await queue.stop(grace=1)
