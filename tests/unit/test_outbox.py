"""The outbox's own rules, with a connector written for the test (no platform behind it)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from connectors.base import ConnectorHealth, OutboundChunk, RenderedChunk, SendResult, ThreadKey
from gateway.config import OutboxSettings
from gateway.outbox import Outbox, ThreadAddress, enqueue_chunks
from gateway.store.db import Database, open_database
from tests.store_helpers import fetch_row, fetch_rows


class RaisingConnector:
    """A non-idempotent connector whose ``send`` has a bug on its first ``failures`` calls."""

    name = "buggy"
    idempotent_send = False

    def __init__(self, failures: int) -> None:
        self.health = ConnectorHealth("connected")
        self.failures = failures
        self.delivered: list[str] = []

    def render(self, markdown: str) -> list[RenderedChunk]:
        return [RenderedChunk(markdown, markdown, "plain")]

    async def send(self, item: OutboundChunk) -> SendResult:
        if self.failures:
            self.failures -= 1
            raise KeyError("a bug in the connector")
        self.delivered.append(item.chunk.text)
        return SendResult.sent(str(len(self.delivered)))


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    yield database
    await database.close()


async def _queue_reply(db: Database, texts: list[str]) -> int:
    def insert(conn):  # type: ignore[no-untyped-def]
        now = time.time()
        (thread_id,) = conn.execute(
            "INSERT INTO threads (channel, chat_id, created_at, updated_at) VALUES ('buggy', '1', ?, ?) "
            "RETURNING id",
            (now, now),
        ).fetchone()
        chunks = [RenderedChunk(t, t, "plain") for t in texts]
        enqueue_chunks(conn, ThreadAddress(thread_id, ThreadKey("buggy", "1")), chunks)
        return thread_id

    return await db.run_transaction(insert)


async def _statuses(db: Database) -> list[str]:
    return [r["status"] for r in await fetch_rows(db, "SELECT status FROM outbox ORDER BY id")]


async def test_a_connector_that_raises_is_retried_and_the_reply_arrives_once(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    connector = RaisingConnector(failures=2)
    outbox = Outbox(db, {"buggy": connector}, OutboxSettings(backoff_base=0.01, backoff_max=0.02))
    thread_id = await _queue_reply(db, ["first", "second"])
    with caplog.at_level(logging.INFO, logger="talon.outbox"):
        outbox.notify(thread_id)
        async with asyncio.timeout(10):
            while await _statuses(db) != ["sent", "sent"]:
                await asyncio.sleep(0.01)
    await outbox.close()
    assert connector.delivered == ["first", "second"]
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1, "the bug's traceback is logged once per row"


async def test_a_connector_that_always_raises_ends_failed_not_unknown(db: Database) -> None:
    connector = RaisingConnector(failures=100)
    settings = OutboxSettings(max_attempts=3, backoff_base=0.01, backoff_max=0.02)
    outbox = Outbox(db, {"buggy": connector}, settings)
    thread_id = await _queue_reply(db, ["only"])
    outbox.notify(thread_id)
    async with asyncio.timeout(10):
        while (statuses := await _statuses(db)) != ["failed"]:
            assert statuses[0] in ("pending", "sending"), statuses
            await asyncio.sleep(0.01)
    await outbox.close()
    row = await fetch_row(db, "SELECT attempts, error FROM outbox")
    assert row["attempts"] == 3
    assert "KeyError" in row["error"]


async def test_rows_wait_unspent_while_their_channel_is_still_starting(db: Database) -> None:
    connector = RaisingConnector(failures=0)
    connector.health = ConnectorHealth("starting")
    outbox = Outbox(db, {"buggy": connector}, OutboxSettings(max_attempts=2, backoff_base=0.01))
    thread_id = await _queue_reply(db, ["hello"])
    outbox.notify(thread_id)
    await asyncio.sleep(1.2)  # longer than the whole backoff of its two attempts
    row = await fetch_row(db, "SELECT status, attempts FROM outbox")
    assert (row["status"], row["attempts"]) == ("pending", 0) and connector.delivered == []
    connector.health.set("retrying", "502 from the platform")
    await asyncio.sleep(0.6)
    assert await _statuses(db) == ["pending"]
    connector.health.set("connected")
    async with asyncio.timeout(5):
        while await _statuses(db) != ["sent"]:
            await asyncio.sleep(0.01)
    await outbox.close()
    assert connector.delivered == ["hello"]
