"""The scheduler firing schedules into the queue: DST, restarts, one-shots, races, the loop."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from gateway.scheduler import Scheduler, list_schedules, record_result
from gateway.store import schedules
from gateway.store.db import Database
from tests.store_helpers import execute_sql, fetch_row, fetch_rows
from tests.unit.scheduler.support import FakeClock, add_thread, local, make_ctx, make_persona
from tools.host.schedule_manage import TOOL as SCHEDULE_TOOL

BERLIN = "Europe/Berlin"


async def add_schedule(
    db: Database,
    thread_id: int,
    clock: FakeClock,
    *,
    cron: str | None = "0 9 * * *",
    run_at: float | None = None,
    tz: str = "UTC",
    prompt: str | None = "say hello",
    prompt_file: str | None = None,
    persona: str = "alice",
) -> str:
    next_at = Scheduler.next_run(cron, tz, clock()) if cron else run_at
    row = await db.run_transaction(
        schedules.create_schedule,
        persona=persona,
        thread_id=thread_id,
        label="greeting",
        cron_expr=cron,
        run_at=run_at,
        timezone=tz,
        prompt=prompt,
        prompt_file=prompt_file,
        next_run_at=next_at,
        now=clock(),
    )
    return row.id


async def queue_payloads(db: Database) -> list[dict[str, Any]]:
    rows = await fetch_rows(db, "SELECT kind, status, payload FROM queue_items ORDER BY id")
    assert all(r["kind"] == "schedule" and r["status"] == "pending" for r in rows)
    return [json.loads(r["payload"]) for r in rows]


async def runs(db: Database, schedule_id: str) -> list[tuple[float, str, str | None]]:
    rows = await fetch_rows(
        db,
        "SELECT due_at, status, error FROM schedule_runs WHERE schedule_id = ? ORDER BY due_at",
        (schedule_id,),
    )
    return [(r["due_at"], r["status"], r["error"]) for r in rows]


def local_iso(ts: float, tz: str) -> str:
    return datetime.fromtimestamp(ts, ZoneInfo(tz)).isoformat()


async def test_due_schedule_is_enqueued_in_its_thread(db: Database, thread_id: int) -> None:
    clock = FakeClock(local("UTC", 2030, 1, 1, 8))
    notified: list[int] = []
    scheduler = Scheduler(db, default_timezone="UTC", clock=clock, on_enqueued=notified.append)
    sid = await add_schedule(db, thread_id, clock)

    assert await scheduler.tick() == 0
    clock.now = local("UTC", 2030, 1, 1, 9, 0, 2)
    assert await scheduler.tick() == 1

    due = local("UTC", 2030, 1, 1, 9)
    assert await queue_payloads(db) == [
        {
            "schedule_id": sid,
            "persona": "alice",
            "prompt": "say hello",
            "label": "greeting",
            "due_at": due,
            "retry": {"max_attempts": 1, "delay": 30.0, "max_delay": 300.0},
        }
    ]
    item = await fetch_row(db, "SELECT thread_id, available_at FROM queue_items")
    assert (item["thread_id"], item["available_at"]) == (thread_id, clock.now)
    assert notified == [thread_id]
    assert await runs(db, sid) == [(due, "queued", None)]
    row = await db.read(schedules.get_schedule, sid)
    assert row.next_run_at == due + 86400
    assert (row.last_status, row.last_run_at) == ("queued", due)
    assert await scheduler.tick() == 0


@pytest.mark.parametrize(
    ("day", "expected"),
    [
        ((2025, 3, 30), ["2025-03-30T03:00:00+02:00"]),  # spring forward: 02:30 shifts to 03:00
        ((2025, 10, 26), ["2025-10-26T02:30:00+02:00"]),  # fall back: once, not twice
    ],
)
async def test_daily_job_runs_once_on_dst_change_days(
    db: Database, thread_id: int, day: tuple[int, int, int], expected: list[str]
) -> None:
    clock = FakeClock(local(BERLIN, *day) - 6 * 3600)
    scheduler = Scheduler(db, default_timezone="UTC", clock=clock)
    await add_schedule(db, thread_id, clock, cron="30 2 * * *", tz=BERLIN)
    end = local(BERLIN, *day) + 86400 + 3600  # a little past the local day
    while clock.now < end:
        await scheduler.tick()
        clock.now += 300
    fired = [local_iso(p["due_at"], BERLIN) for p in await queue_payloads(db)]
    assert [f for f in fired if f.startswith("-".join(f"{x:02d}" for x in day))] == expected
    assert len(fired) == 1


async def test_hourly_job_fires_every_real_hour_on_the_long_day(db: Database, thread_id: int) -> None:
    clock = FakeClock(local(BERLIN, 2025, 10, 26) - 1)
    scheduler = Scheduler(db, default_timezone="UTC", clock=clock)
    await add_schedule(db, thread_id, clock, cron="0 * * * *", tz=BERLIN)
    while clock.now < local(BERLIN, 2025, 10, 27) - 1:
        await scheduler.tick()
        clock.now += 600
    assert len(await queue_payloads(db)) == 25


async def test_restart_inside_grace_fires_the_missed_run_once(db: Database, thread_id: int) -> None:
    clock = FakeClock(local("UTC", 2030, 1, 1, 8))
    sid = await add_schedule(db, thread_id, clock)
    clock.now = local("UTC", 2030, 1, 1, 9, 7)  # came back 7 minutes late
    scheduler = Scheduler(db, default_timezone="UTC", clock=clock, grace_seconds=600)
    assert await scheduler.tick() == 1
    due = local("UTC", 2030, 1, 1, 9)
    assert [p["due_at"] for p in await queue_payloads(db)] == [due]
    assert await runs(db, sid) == [(due, "queued", None)]


async def test_restart_outside_grace_skips_and_records_missed_runs(db: Database, thread_id: int) -> None:
    clock = FakeClock(local("UTC", 2030, 1, 1, 8))
    sid = await add_schedule(db, thread_id, clock)
    clock.now = local("UTC", 2030, 1, 3, 12)  # stopped for three 09:00 runs
    scheduler = Scheduler(db, default_timezone="UTC", clock=clock, grace_seconds=600)
    assert await scheduler.tick() == 0
    assert await queue_payloads(db) == []
    assert await runs(db, sid) == [(local("UTC", 2030, 1, 3, 9), "skipped", "missed 3 runs while stopped")]
    row = await db.read(schedules.get_schedule, sid)
    assert row.next_run_at == local("UTC", 2030, 1, 4, 9)
    assert row.last_status == "skipped"
    assert row.enabled == 1


async def test_long_outage_of_a_minutely_cron_fires_once_without_flooding(
    db: Database, thread_id: int
) -> None:
    clock = FakeClock(local("UTC", 2030, 1, 1))
    sid = await add_schedule(db, thread_id, clock, cron="* * * * *")
    clock.now = local("UTC", 2030, 1, 8, 0, 0, 20)  # a week later
    scheduler = Scheduler(db, default_timezone="UTC", clock=clock, grace_seconds=600)
    assert await scheduler.tick() == 1
    recorded = await runs(db, sid)
    assert [status for _, status, _ in recorded] == ["skipped", "queued"]
    assert recorded[1][0] == local("UTC", 2030, 1, 8)
    assert recorded[0][2].startswith("missed at least ")
    assert (await db.read(schedules.get_schedule, sid)).next_run_at == local("UTC", 2030, 1, 8, 0, 1)


async def test_one_shot_fires_once_then_disables(db: Database, thread_id: int) -> None:
    clock = FakeClock(local("UTC", 2030, 1, 1, 8))
    at = local("UTC", 2030, 1, 1, 8, 30)
    sid = await add_schedule(db, thread_id, clock, cron=None, run_at=at)
    scheduler = Scheduler(db, default_timezone="UTC", clock=clock)
    clock.now = at + 1
    assert await scheduler.tick() == 1
    clock.now = at + 86400
    assert await scheduler.tick() == 0
    assert [p["due_at"] for p in await queue_payloads(db)] == [at]
    row = await db.read(schedules.get_schedule, sid)
    assert (row.enabled, row.next_run_at, row.last_status) == (0, None, "queued")


async def test_one_shot_missed_beyond_grace_is_skipped(db: Database, thread_id: int) -> None:
    clock = FakeClock(local("UTC", 2030, 1, 1, 8))
    at = local("UTC", 2030, 1, 1, 8, 30)
    sid = await add_schedule(db, thread_id, clock, cron=None, run_at=at)
    clock.now = at + 3600
    assert await Scheduler(db, default_timezone="UTC", clock=clock).tick() == 0
    assert await queue_payloads(db) == []
    assert await runs(db, sid) == [(at, "skipped", "missed 1 run while stopped")]
    assert (await db.read(schedules.get_schedule, sid)).enabled == 0


async def test_concurrent_ticks_enqueue_once(db: Database, thread_id: int) -> None:
    clock = FakeClock(local("UTC", 2030, 1, 1, 8))
    await add_schedule(db, thread_id, clock)
    await add_schedule(db, thread_id, clock, cron=None, run_at=local("UTC", 2030, 1, 1, 8, 55))
    clock.now = local("UTC", 2030, 1, 1, 9, 0, 1)
    a = Scheduler(db, default_timezone="UTC", clock=clock)
    b = Scheduler(db, default_timezone="UTC", clock=clock)
    results = await asyncio.gather(a.tick(), a.tick(), b.tick())
    assert sum(results) == 2
    assert len(await queue_payloads(db)) == 2


async def test_prompt_file_is_read_at_fire_time(db: Database, thread_id: int, tmp_path: Path) -> None:
    persona = make_persona(tmp_path, prompts={"report": "old text"})
    clock = FakeClock(local("UTC", 2030, 1, 1, 8))
    sid = await add_schedule(db, thread_id, clock, prompt=None, prompt_file="report")
    (persona.path / "prompts" / "report.md").write_text("Post the weekly report.", encoding="utf-8")
    scheduler = Scheduler(db, default_timezone="UTC", clock=clock, personas={"alice": persona})
    clock.now = local("UTC", 2030, 1, 1, 9)
    assert await scheduler.tick() == 1
    assert (await queue_payloads(db))[0]["prompt"] == "Post the weekly report."

    (persona.path / "prompts" / "report.md").unlink()
    clock.now = local("UTC", 2030, 1, 2, 9)
    assert await scheduler.tick() == 0
    assert len(await queue_payloads(db)) == 1
    assert (await runs(db, sid))[-1] == (
        clock.now,
        "failed",
        "prompt file 'report' of persona 'alice' not found",
    )
    row = await db.read(schedules.get_schedule, sid)
    assert (row.last_status, row.next_run_at, row.enabled) == (
        "failed",
        local("UTC", 2030, 1, 3, 9),
        1,
    )


async def test_broken_stored_schedule_is_disabled_and_others_still_fire(db: Database, thread_id: int) -> None:
    clock = FakeClock(local("UTC", 2030, 1, 1, 8))
    good = await add_schedule(db, thread_id, clock)
    bad = await add_schedule(db, thread_id, clock)
    await execute_sql(db, "UPDATE schedules SET cron_expr = 'not a cron' WHERE id = ?", (bad,))
    clock.now = local("UTC", 2030, 1, 1, 9)
    assert await Scheduler(db, default_timezone="UTC", clock=clock).tick() == 1
    assert [p["schedule_id"] for p in await queue_payloads(db)] == [good]
    row = await db.read(schedules.get_schedule, bad)
    assert (row.enabled, row.last_status) == (0, "failed")
    assert (await runs(db, bad))[0][1] == "failed"


async def test_record_result_updates_run_and_schedule(db: Database, thread_id: int) -> None:
    clock = FakeClock(local("UTC", 2030, 1, 1, 8))
    sid = await add_schedule(db, thread_id, clock)
    clock.now = local("UTC", 2030, 1, 1, 9)
    await Scheduler(db, default_timezone="UTC", clock=clock).tick()
    due = (await queue_payloads(db))[0]["due_at"]

    assert await record_result(db, sid, due, status="failed", run_id=7, error="model timed out")
    assert await runs(db, sid) == [(due, "failed", "model timed out")]
    assert (await db.read(schedules.get_schedule, sid)).last_status == "failed"
    assert not await record_result(db, sid, due + 1, status="completed", run_id=8, error=None)
    with pytest.raises(ValueError, match="status must be one of"):
        await record_result(db, sid, due, status="done", run_id=None, error=None)

    listed = await list_schedules(db)
    assert listed == [
        {
            "id": sid,
            "persona": "alice",
            "thread_id": thread_id,
            "label": "greeting",
            "cron_expr": "0 9 * * *",
            "run_at": None,
            "timezone": "UTC",
            "prompt_file": None,
            "enabled": True,
            "next_run_at": "2030-01-02T09:00:00+00:00",
            "last_run_at": "2030-01-01T09:00:00+00:00",
            "last_status": "failed",
        }
    ]


async def test_run_loop_fires_on_time_and_wakes_on_a_new_schedule(db: Database, tmp_path: Path) -> None:
    thread_id = await add_thread(db)
    fired = asyncio.Event()
    notified: list[int] = []

    def on_enqueued(tid: int) -> None:
        notified.append(tid)
        fired.set()

    scheduler = Scheduler(db, default_timezone="UTC", on_enqueued=on_enqueued, max_sleep=60)
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    try:
        await asyncio.sleep(0.05)  # the loop is now asleep for max_sleep: nothing is scheduled
        ctx = make_ctx(db, thread_id, make_persona(tmp_path))
        run_at = datetime.fromtimestamp(time.time() + 0.3, ZoneInfo("UTC")).isoformat()
        created = await SCHEDULE_TOOL.handler(ctx, {"action": "create", "runAt": run_at, "prompt": "ping"})
        started = time.monotonic()
        await asyncio.wait_for(fired.wait(), timeout=5)
        assert time.monotonic() - started < 3
        assert notified == [thread_id]
        assert (await queue_payloads(db))[0]["schedule_id"] == created["scheduleId"]
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=5)
    assert task.done()
