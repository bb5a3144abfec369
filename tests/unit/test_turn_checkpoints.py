"""A turn's checkpoints go when the turn ends: the one it saved, and one an earlier attempt
(another process, before a restart) saved for the run its batch resumes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from connectors.base import ThreadKey
from gateway.runtime.checkpoints import Suspended
from gateway.runtime.model import Usage
from gateway.store.db import Database, open_database
from gateway.store.interactions import load_checkpoint, save_checkpoint
from gateway.store.queue import Batch, QueueItem
from gateway.store.runs import start_run
from gateway.store.threads import ThreadRow, upsert_thread
from gateway.turn_checkpoints import TurnCheckpoints

STATE = Suspended(history=[], calls=(), usage=Usage(1, 1), model_calls=1, tool_calls=[])


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    db = await open_database(tmp_path / "talon.db")
    yield db
    await db.close()


async def _run(db: Database, chat: str) -> tuple[ThreadRow, int]:
    def begin(conn: Any) -> tuple[ThreadRow, int]:
        thread = upsert_thread(conn, ThreadKey("tg", chat), chat_type="dm", persona="p", now=1.0)
        return thread, start_run(conn, thread.id, "p", "m:m", 1.0)

    return await db.run_transaction(begin)


def _batch(thread: ThreadRow, run_id: int | None = None) -> Batch:
    return Batch(thread.id, (QueueItem(1, "message", None, {}, 1, run_id),))


async def _left(db: Database, run_id: int) -> bool:
    return await db.run_transaction(load_checkpoint, run_id) is not None


async def test_the_checkpoint_a_turn_saved_is_gone_when_it_ends(db: Database) -> None:
    thread, run_id = await _run(db, "1")
    checkpoints = TurnCheckpoints(db)
    batch = _batch(thread)
    await checkpoints.save(run_id, batch, STATE)
    await checkpoints.turn_ended(thread, batch, "completed", "ok", None)
    assert not await _left(db, run_id)


async def test_a_resumed_run_drops_the_checkpoint_an_earlier_process_saved(db: Database) -> None:
    thread, run_id = await _run(db, "2")
    await db.run_transaction(save_checkpoint, run_id, thread.id, {"history": []}, [], 1.0)
    after_restart = TurnCheckpoints(db)
    await after_restart.turn_ended(thread, _batch(thread, run_id), "failed", "", "boom")
    assert not await _left(db, run_id)


async def test_another_threads_turn_leaves_a_waiting_checkpoint_alone(db: Database) -> None:
    waiting, run_id = await _run(db, "3")
    other, _ = await _run(db, "4")
    checkpoints = TurnCheckpoints(db)
    await checkpoints.save(run_id, _batch(waiting), STATE)
    await checkpoints.turn_ended(other, _batch(other), "completed", "ok", None)
    assert await _left(db, run_id)
