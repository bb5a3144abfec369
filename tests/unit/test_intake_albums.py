"""Albums across a restart: the pending photos of an album wait for the rest of it, and a
photo of an album that was answered already is stored without a turn of its own."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from connectors.base import InboundEvent, IntakeStatus, Sender, ThreadKey
from gateway.config import Binding
from gateway.intake_albums import RESTART_HOLD
from gateway.pipeline import Bindings, Pipeline
from gateway.store.db import Database, open_database
from tests.store_helpers import fetch_rows

CHAT = ThreadKey("tg", "42", None)


def _photo(n: int, album: str = "g1") -> InboundEvent:
    return InboundEvent(
        channel="tg", event_id=str(n), thread_key=CHAT, chat_type="dm", sender=Sender("42", "Ada"),
        text="compare" if n == 0 else "", album=album,
    )  # fmt: skip


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    yield database
    await database.close()


def _pipeline(db: Database) -> Pipeline:
    return Pipeline(db, Bindings([Binding(channel="tg", persona="p")], ["p"]))


async def test_after_a_restart_the_rest_of_an_album_is_due_with_its_pending_photos(db: Database) -> None:
    before = _pipeline(db)
    for n in range(2):
        await before.ingest(_photo(n))
    restarted = _pipeline(db)  # the daemon died; its memory of the album is gone
    started = time.time()
    await restarted.recover()
    late = await restarted.ingest(_photo(2))

    assert late.status is IntakeStatus.ACCEPTED
    rows = await fetch_rows(db, "SELECT available_at FROM queue_items WHERE status = 'pending' ORDER BY id")
    assert len(rows) == 3 and len({r["available_at"] for r in rows}) == 1
    assert rows[0]["available_at"] >= started + RESTART_HOLD - 0.5


async def test_a_photo_of_an_album_answered_before_the_restart_gets_no_turn_of_its_own(db: Database) -> None:
    before = _pipeline(db)
    for n in range(2):
        await before.ingest(_photo(n))
    await db.run_transaction(lambda conn: conn.execute("UPDATE queue_items SET status = 'done'"))
    restarted = _pipeline(db)
    await restarted.recover()
    late = await restarted.ingest(_photo(2))
    other = await restarted.ingest(_photo(3, album="g2"))  # a new album is answered as usual

    assert late.status is IntakeStatus.STORED
    assert other.status is IntakeStatus.ACCEPTED
    rows = await fetch_rows(db, "SELECT message_id FROM queue_items WHERE status = 'pending'")
    assert [r["message_id"] for r in rows] == [other.message_id]
