"""The scheduler's full-schedule parts: expiry, shell tasks run once (never again after a stop),
their outcome in the history and the notification, and a schedule's own retry policy in the queue."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.config import QueueSettings
from gateway.queue import TurnHandler, TurnQueue
from gateway.runtime.model import ProviderError
from gateway.scheduler import Scheduler
from gateway.scheduling.outcomes import ShellOutcome
from gateway.store import schedules
from gateway.store.db import Database
from gateway.store.queue import Batch, enqueue_task
from gateway.store.schedules import ScheduleRow
from tests.store_helpers import fetch_rows
from tests.unit.scheduler.support import FakeClock, local


async def add_task(db: Database, thread_id: int, clock: FakeClock, **kw: Any) -> ScheduleRow:
    fields: dict[str, Any] = {
        "label": "Stamp",
        "cron_expr": None,
        "run_at": clock() + 60,
        "timezone": "UTC",
        "prompt": "echo hi",
        "prompt_file": None,
        "next_run_at": clock() + 60,
        "task_id": "stamp",
    }
    fields.update(kw)
    return await db.run_transaction(
        schedules.create_schedule, persona="alice", thread_id=thread_id, now=clock(), **fields
    )


class Runner:
    def __init__(self, outcome: ShellOutcome, gate: asyncio.Event | None = None) -> None:
        self.outcome, self.gate, self.rows = outcome, gate, []

    async def __call__(self, row: ScheduleRow) -> ShellOutcome:
        self.rows.append(row.id)
        if self.gate is not None:
            await self.gate.wait()
        return self.outcome


class Notices:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bool, str, str | None]] = []

    async def after_run(self, row: ScheduleRow, *, ok: bool, summary: str, output: str | None) -> None:
        self.sent.append((row.task_id, ok, summary, output))


async def _run_until(scheduler: Scheduler, done: Any) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    try:
        async with asyncio.timeout(10):
            while not done():
                await asyncio.sleep(0.01)
    finally:
        stop.set()
        await task


async def test_a_shell_task_runs_once_and_records_exit_code_output_and_notice(
    db: Database, thread_id: int
) -> None:
    clock = FakeClock(local("UTC", 2030, 1, 1, 8))
    row = await add_task(db, thread_id, clock, executor="shell", notify_on="always")
    runner, notices = Runner(ShellOutcome(3, 42, "some output\n")), Notices()
    scheduler = Scheduler(db, default_timezone="UTC", clock=clock, shell=runner, notifier=notices)  # type: ignore[arg-type]
    clock.now += 61
    await _run_until(scheduler, lambda: notices.sent)
    assert runner.rows == [row.id]
    (record,) = await db.read(schedules.run_history, row.id, 10)
    assert (record.status, record.exit_code, record.duration_ms, record.output_tail, record.error) == (
        "failed",
        3,
        42,
        "some output\n",
        "exit code 3",
    )
    assert notices.sent == [("stamp", False, "ran: exit code 3 in 42 ms", "some output\n")]
    assert await fetch_rows(db, "SELECT id FROM queue_items") == []  # no turn, no model
    again = await db.read(schedules.get_schedule, row.id)
    assert again is not None and (again.enabled, again.last_status) == (False, "failed")


async def test_a_shell_run_cut_by_a_stop_is_failed_and_never_run_again(db: Database, thread_id: int) -> None:
    clock = FakeClock(local("UTC", 2030, 1, 1, 8))
    row = await add_task(db, thread_id, clock, executor="shell")
    runner = Runner(ShellOutcome(0, 1, ""), gate=asyncio.Event())
    clock.now += 61
    await _run_until(Scheduler(db, default_timezone="UTC", clock=clock, shell=runner), lambda: runner.rows)
    (record,) = await db.read(schedules.run_history, row.id, 10)
    assert (record.status, record.error) == ("failed", "stopped: the daemon shut down while the command ran")
    second = Runner(ShellOutcome(0, 1, ""))
    scheduler = Scheduler(db, default_timezone="UTC", clock=clock, shell=second)
    await scheduler.tick()
    assert second.rows == []


async def test_a_task_fires_until_its_expiry_and_not_after(db: Database, thread_id: int) -> None:
    clock = FakeClock(local("UTC", 2030, 1, 1, 8))
    start = clock()
    row = await add_task(
        db,
        thread_id,
        clock,
        cron_expr="*/5 * * * *",
        run_at=None,
        next_run_at=start + 300,
        expires_at=start + 700,
    )
    late = await add_task(
        db, thread_id, clock, task_id="late", next_run_at=start + 300, expires_at=start + 200
    )
    scheduler = Scheduler(db, default_timezone="UTC", clock=clock)
    clock.now = start + 301
    assert await scheduler.tick() == 1  # 08:05; the one-shot expired at 08:03:20 first
    current = await db.read(schedules.get_schedule, row.id)
    assert current is not None and current.next_run_at == start + 600
    clock.now = start + 601
    assert await scheduler.tick() == 1  # 08:10; 08:15 would be past the expiry
    current = await db.read(schedules.get_schedule, row.id)
    assert current is not None and (current.enabled, current.next_run_at) == (False, None)
    expired = await db.read(schedules.get_schedule, late.id)
    assert expired is not None and (expired.enabled, expired.last_status) == (False, "expired")
    assert await db.read(schedules.run_history, late.id, 10) == []


class Failing(TurnHandler):
    def __init__(self) -> None:
        self.calls = 0

    async def run(self, batch: Batch, begun: Any) -> None:
        self.calls += 1
        raise ProviderError("HTTP 503", transient=True)


@pytest.mark.parametrize(("max_attempts", "expected_calls"), [(1, 1), (3, 3)])
async def test_a_queued_items_own_retry_policy_bounds_its_attempts(
    db: Database, thread_id: int, max_attempts: int, expected_calls: int
) -> None:
    retry = {"max_attempts": max_attempts, "delay": 0.01, "max_delay": 0.02}
    await db.run_transaction(enqueue_task, thread_id, "schedule", {"retry": retry}, now=0.0)
    handler, heard = Failing(), []

    async def on_retry(batch: Batch, error: str, delay: float) -> None:
        heard.append((batch.attempts, delay))

    queue = TurnQueue(db, QueueSettings(max_attempts=5), handler, on_retry=on_retry)
    await queue.start()
    queue.notify(thread_id)
    try:
        async with asyncio.timeout(10):
            while not await fetch_rows(db, "SELECT id FROM queue_items WHERE status = 'dead'"):
                await asyncio.sleep(0.01)
    finally:
        await queue.stop(grace=1.0)
    assert handler.calls == expected_calls
    assert heard == [(1, 0.01), (2, 0.02)][: expected_calls - 1]
