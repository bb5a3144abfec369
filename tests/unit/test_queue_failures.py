"""The turn queue tells a failure outside the turn (retried with backoff up to
``max_attempts``) from a bug in turn code (tried once more, then dead-lettered as an
internal error, its traceback logged once)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.config import QueueSettings
from gateway.errors import TransientError
from gateway.queue import Batch, ReplyNotSavedError, TurnHandler, TurnQueue, complete_in, dead_letters
from gateway.runtime.model import ProviderError
from gateway.store.db import Database, open_database
from tests.store_helpers import fetch_row

SETTINGS = QueueSettings(max_attempts=4, backoff_base=0.01, backoff_max=0.02)


class Scripted(TurnHandler):
    """Each run raises the next of ``failures`` (None: the turn succeeds), then succeeds."""

    def __init__(self, db: Database, failures: list[Callable[[], BaseException] | None]):
        self.db = db
        self.failures = failures
        self.runs = 0
        self.ended: asyncio.Future[tuple[str, BaseException | None]] = (
            asyncio.get_running_loop().create_future()
        )

    async def run(self, batch: Batch, begun: Any) -> None:
        self.runs += 1
        failure = self.failures.pop(0) if self.failures else None
        if failure is not None:
            raise failure()
        await self.db.run_transaction(complete_in, batch, None)
        self.ended.set_result(("done", None))

    async def gave_up(
        self, batch: Batch, error: str, *, canceled: bool, failure: BaseException | None = None
    ) -> None:
        self.ended.set_result((error, failure))


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    yield database
    await database.close()


async def run_one(db: Database, handler: Scripted) -> tuple[str, BaseException | None, str]:
    """Queue one message item, serve it until it is done or dead-lettered; its status too."""
    now = time.time()

    def insert(conn: sqlite3.Connection) -> int:
        (thread_id,) = conn.execute(
            "INSERT INTO threads (channel, chat_id, created_at, updated_at) VALUES ('console', 'c', ?, ?) "
            "RETURNING id",
            (now, now),
        ).fetchone()
        conn.execute(
            "INSERT INTO queue_items (thread_id, available_at, created_at, updated_at) VALUES (?, ?, ?, ?)",
            (thread_id, now, now, now),
        )
        return int(thread_id)

    thread_id = await db.run_transaction(insert)
    queue = TurnQueue(db, SETTINGS, handler)
    await queue.start()
    try:
        queue.notify(thread_id)
        async with asyncio.timeout(10):
            error, failure = await handler.ended
    finally:
        await queue.stop(grace=1)
    (status,) = await fetch_row(db, "SELECT status FROM queue_items WHERE thread_id = ?", (thread_id,))
    return error, failure, status


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info and r.name == "talon.queue"]


async def test_a_bug_in_turn_code_runs_twice_then_is_dead_lettered_as_an_internal_error(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    handler = Scripted(db, [lambda: KeyError("persona")] * SETTINGS.max_attempts)

    error, failure, status = await run_one(db, handler)

    assert handler.runs == 2
    assert status == "dead" and isinstance(failure, KeyError)
    assert error == "internal error: KeyError: 'persona'"
    (dead,) = await dead_letters(db)  # what `talon status` shows
    assert dead["last_error"] == "internal error: KeyError: 'persona'" and dead["attempts"] == 2
    assert len(tracebacks(caplog)) == 1


async def test_a_bug_that_does_not_come_back_was_a_race_and_the_turn_completes(db: Database) -> None:
    handler = Scripted(db, [lambda: AttributeError("'NoneType' object has no attribute 'id'")])

    error, _, status = await run_one(db, handler)

    assert (handler.runs, error, status) == (2, "done", "done")


async def test_a_different_bug_on_the_second_try_is_logged_with_its_own_traceback(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    handler = Scripted(db, [lambda: KeyError("persona"), lambda: TypeError("not callable")])

    error, _, status = await run_one(db, handler)

    assert (handler.runs, status, error) == (2, "dead", "internal error: TypeError: not callable")
    assert [type(r.exc_info[1]) for r in tracebacks(caplog) if r.exc_info] == [KeyError, TypeError]


async def test_a_bug_after_a_transient_failure_still_gets_its_one_more_try(db: Database) -> None:
    transient = lambda: ReplyNotSavedError("reply not saved", reason="the database refused the write")  # noqa: E731
    handler = Scripted(db, [transient, lambda: KeyError("x"), lambda: KeyError("x")])

    _, _, status = await run_one(db, handler)

    assert (handler.runs, status) == (3, "dead")


@pytest.mark.parametrize(
    "failure",
    [
        lambda: ProviderError("model provider 'fake': HTTP 503", transient=True),
        lambda: TimeoutError(),
        lambda: ReplyNotSavedError(
            "reply not saved: IntegrityError", reason="the database refused the write"
        ),
        lambda: TransientError("the MCP server is restarting"),
    ],
    ids=["provider", "timeout", "reply-not-saved", "transient"],
)
async def test_a_failure_outside_the_turn_gets_every_configured_attempt(
    db: Database, failure: Callable[[], BaseException], caplog: pytest.LogCaptureFixture
) -> None:
    handler = Scripted(db, [failure] * SETTINGS.max_attempts)

    error, raised, status = await run_one(db, handler)

    assert handler.runs == SETTINGS.max_attempts and status == "dead"
    assert isinstance(raised, type(failure())) and not error.startswith("internal error")
    assert tracebacks(caplog) == []


async def test_a_busy_database_gets_every_configured_attempt(db: Database, tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")

    def busy() -> BaseException:
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            return exc
        finally:
            other.close()
        raise AssertionError("the database was not locked")

    try:
        handler = Scripted(db, [busy] * SETTINGS.max_attempts)
        error, _, status = await run_one(db, handler)
    finally:
        holder.close()

    assert handler.runs == SETTINGS.max_attempts and status == "dead"
    assert error == "database busy: database is locked"


async def test_a_permanent_provider_failure_is_dead_lettered_at_once(db: Database) -> None:
    handler = Scripted(db, [lambda: ProviderError("model provider 'fake': HTTP 401", transient=False)])

    error, _, status = await run_one(db, handler)

    assert (handler.runs, status, error) == (1, "dead", "model provider 'fake': HTTP 401")
