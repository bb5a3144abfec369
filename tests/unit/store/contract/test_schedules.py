"""schedules: a persona's schedules created, read, changed and deleted; which are due; each
occurrence recorded once; and how a scheduled turn's result is kept."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from connectors.base import ThreadKey
from gateway.store.schedules import ScheduleRow
from tests.unit.store.contract.conftest import Backend


@pytest.fixture
async def thread_id(store: Backend) -> int:
    row = await store.write(
        store.threads.upsert_thread, ThreadKey("console", "main"), chat_type="dm", persona="alice", now=1.0
    )
    return row.id


async def create(
    store: Backend,
    thread_id: int,
    *,
    persona: str = "alice",
    next_run_at: float | None = 100.0,
    now: float = 1.0,
    **kw: Any,
) -> ScheduleRow:
    fields: dict[str, Any] = {
        "label": "greeting",
        "cron_expr": "0 9 * * *",
        "run_at": None,
        "timezone": "Europe/Berlin",
        "prompt": "say hello",
        "prompt_file": None,
    }
    fields.update(kw)
    return await store.write(
        store.schedules.create_schedule,
        persona=persona,
        thread_id=thread_id,
        next_run_at=next_run_at,
        now=now,
        **fields,
    )


async def test_a_created_schedule_reads_back_as_written(store: Backend, thread_id: int) -> None:
    row = await create(store, thread_id, now=5.0)
    assert row.id.startswith("sch_") and len(row.id) == 14
    assert (row.persona, row.thread_id, row.label, row.cron_expr, row.run_at) == (
        "alice",
        thread_id,
        "greeting",
        "0 9 * * *",
        None,
    )
    assert (row.timezone, row.prompt, row.prompt_file, row.enabled, row.next_run_at) == (
        "Europe/Berlin",
        "say hello",
        None,
        True,
        100.0,
    )
    assert (row.last_run_at, row.last_status, row.created_at, row.updated_at) == (None, None, 5.0, 5.0)
    assert await store.read(store.schedules.get_schedule, row.id) == row
    assert await store.read(store.schedules.get_schedule, row.id, "alice") == row
    assert await store.read(store.schedules.get_schedule, row.id, "bob") is None
    assert await store.read(store.schedules.get_schedule, "sch_0000000000") is None
    other = await create(store, thread_id)
    assert other.id != row.id


async def test_listings_keep_to_their_persona_oldest_first(store: Backend, thread_id: int) -> None:
    second = await create(store, thread_id, now=2.0)
    first = await create(store, thread_id, now=1.0)
    bobs = await create(store, thread_id, persona="bob", now=0.5)
    assert [s.id for s in await store.read(store.schedules.persona_schedules, "alice")] == [
        first.id,
        second.id,
    ]
    assert [s.id for s in await store.read(store.schedules.all_schedules)] == [first.id, second.id, bobs.id]
    assert await store.read(store.schedules.count_enabled, "alice") == 2
    await store.write(
        store.schedules.update_schedule, first.id, "alice", {"enabled": 0, "next_run_at": None}, now=3.0
    )
    assert await store.read(store.schedules.count_enabled, "alice") == 1
    assert await store.read(store.schedules.count_enabled, "carol") == 0


async def test_an_update_changes_only_the_owners_schedule_and_only_known_columns(
    store: Backend, thread_id: int
) -> None:
    row = await create(store, thread_id)
    updated = await store.write(
        store.schedules.update_schedule,
        row.id,
        "alice",
        {"label": "renamed", "cron_expr": None, "run_at": 500.0, "next_run_at": 500.0},
        now=9.0,
    )
    assert updated is not None
    assert (updated.label, updated.cron_expr, updated.run_at, updated.next_run_at, updated.updated_at) == (
        "renamed",
        None,
        500.0,
        500.0,
        9.0,
    )
    assert await store.read(store.schedules.get_schedule, row.id) == updated
    assert await store.write(store.schedules.update_schedule, row.id, "bob", {"label": "x"}, now=10.0) is None
    with pytest.raises(ValueError, match="not updatable: persona"):
        await store.write(store.schedules.update_schedule, row.id, "alice", {"persona": "bob"}, now=10.0)
    assert await store.read(store.schedules.get_schedule, row.id) == updated


async def test_deleting_removes_the_schedule_and_its_history(store: Backend, thread_id: int) -> None:
    row = await create(store, thread_id)
    assert await store.write(store.schedules.insert_run, row.id, 100.0, "queued", None, 100.0)
    assert await store.write(store.schedules.delete_schedule, row.id, "bob") is False
    assert await store.write(store.schedules.delete_schedule, row.id, "alice") is True
    assert await store.read(store.schedules.get_schedule, row.id) is None
    assert await store.write(store.schedules.delete_schedule, row.id, "alice") is False
    assert (
        await store.write(
            store.schedules.record_result,
            row.id,
            100.0,
            status="completed",
            run_id=None,
            error=None,
            now=101.0,
        )
        is False
    )


async def test_due_schedules_are_the_enabled_ones_whose_time_has_come_earliest_first(
    store: Backend, thread_id: int
) -> None:
    later = await create(store, thread_id, next_run_at=50.0)
    sooner = await create(store, thread_id, next_run_at=20.0)
    await create(store, thread_id, next_run_at=80.0)
    off = await create(store, thread_id, next_run_at=10.0)
    await store.write(store.schedules.update_schedule, off.id, "alice", {"enabled": 0}, now=2.0)
    await create(store, thread_id, next_run_at=None)
    assert await store.read(store.schedules.due_schedules, 50.0) == [(sooner.id, 20.0), (later.id, 50.0)]
    assert await store.read(store.schedules.due_schedules, 5.0) == []
    assert await store.read(store.schedules.next_due_at) == 20.0


async def test_nothing_is_due_without_enabled_schedules(store: Backend, thread_id: int) -> None:
    assert await store.read(store.schedules.next_due_at) is None
    row = await create(store, thread_id, next_run_at=10.0)
    await store.write(store.schedules.disable_failed, row.id, 2.0)
    assert await store.read(store.schedules.next_due_at) is None
    failed = await store.read(store.schedules.get_schedule, row.id)
    assert failed is not None
    assert (failed.enabled, failed.next_run_at, failed.last_status, failed.updated_at) == (
        False,
        None,
        "failed",
        2.0,
    )


async def test_a_schedule_without_a_next_run_gets_one_unless_it_got_one_meanwhile(
    store: Backend, thread_id: int
) -> None:
    row = await create(store, thread_id, next_run_at=None)
    await create(store, thread_id, next_run_at=30.0)
    assert [s.id for s in await store.read(store.schedules.without_next_run)] == [row.id]
    await store.write(store.schedules.set_next_run, row.id, 60.0, 3.0)
    assert await store.read(store.schedules.without_next_run) == []
    await store.write(store.schedules.set_next_run, row.id, 90.0, 4.0)
    after = await store.read(store.schedules.get_schedule, row.id)
    assert after is not None and (after.next_run_at, after.updated_at) == (60.0, 3.0)


async def test_each_occurrence_is_recorded_once(store: Backend, thread_id: int) -> None:
    row = await create(store, thread_id)
    assert await store.write(store.schedules.insert_run, row.id, 100.0, "queued", None, 100.0) is True
    assert await store.write(store.schedules.insert_run, row.id, 100.0, "queued", None, 100.5) is False
    assert (
        await store.write(store.schedules.insert_run, row.id, 200.0, "skipped", "missed 1 run", 200.0) is True
    )


async def test_advancing_moves_the_schedule_on_and_no_next_run_disables_it(
    store: Backend, thread_id: int
) -> None:
    row = await create(store, thread_id)
    await store.write(
        store.schedules.advance, row.id, next_run_at=200.0, last_run_at=100.0, last_status="queued", now=100.0
    )
    moved = await store.read(store.schedules.get_schedule, row.id)
    assert moved is not None
    assert (moved.enabled, moved.next_run_at, moved.last_run_at, moved.last_status) == (
        True,
        200.0,
        100.0,
        "queued",
    )
    await store.write(
        store.schedules.advance, row.id, next_run_at=None, last_run_at=200.0, last_status="queued", now=200.0
    )
    done = await store.read(store.schedules.get_schedule, row.id)
    assert done is not None and (done.enabled, done.next_run_at, done.last_run_at) == (False, None, 200.0)


async def test_a_result_is_kept_for_its_occurrence_and_the_newest_one_names_the_status(
    store: Backend, thread_id: int
) -> None:
    row = await create(store, thread_id)
    await store.write(store.schedules.insert_run, row.id, 100.0, "queued", None, 100.0)
    await store.write(store.schedules.insert_run, row.id, 200.0, "queued", None, 200.0)

    async def record(due_at: float, status: str) -> bool:
        return await store.write(
            store.schedules.record_result, row.id, due_at, status=status, run_id=7, error=None, now=300.0
        )

    assert await record(200.0, "completed") is True
    assert await record(100.0, "failed") is True  # an older occurrence does not overwrite the status
    after = await store.read(store.schedules.get_schedule, row.id)
    assert after is not None and (after.last_status, after.last_run_at, after.updated_at) == (
        "completed",
        200.0,
        300.0,
    )
    assert await record(250.0, "completed") is False  # no such occurrence


async def test_task_ids_are_unique_per_persona_and_default_to_the_id(store: Backend, thread_id: int) -> None:
    plain = await create(store, thread_id)
    assert plain.task_id == plain.id
    named = await create(store, thread_id, task_id="nightly", executor="shell", cwd="/shared", max_attempts=3)
    assert (named.task_id, named.executor, named.cwd, named.max_attempts) == (
        "nightly",
        "shell",
        "/shared",
        3,
    )
    assert (named.notify_on, named.notify_chat, named.retry_delay_ms, named.expires_at) == (
        "failure",
        None,
        30000,
        None,
    )
    assert await store.read(store.schedules.get_task, "alice", "nightly") == named
    assert await store.read(store.schedules.get_task, "bob", "nightly") is None
    assert await store.write(store.schedules.free_task_id, "alice", "nightly") == "nightly-2"
    assert await store.write(store.schedules.free_task_id, "bob", "nightly") == "nightly"
    with pytest.raises(sqlite3.IntegrityError, match=r"(?i)unique"):
        await create(store, thread_id, task_id="nightly")
    disabled = await create(store, thread_id, task_id="off", enabled=False)
    assert (disabled.enabled, disabled.next_run_at) == (False, None)


async def test_attempts_of_one_occurrence_each_get_a_row_oldest_first(store: Backend, thread_id: int) -> None:
    row = await create(store, thread_id)
    assert await store.write(store.schedules.insert_run, row.id, 100.0, "queued", None, 100.0)
    assert await store.write(store.schedules.attempt_started, row.id, 100.0, 1, 7, 101.0)
    retried = dict(status="retrying", run_id=None, error="HTTP 503", now=102.0)
    assert await store.write(store.schedules.record_result, row.id, 100.0, **retried)
    # Attempt 2 was cut short by a restart; attempt 3 finds it open and marks it.
    assert await store.write(store.schedules.attempt_started, row.id, 100.0, 2, 8, 103.0)
    assert await store.write(store.schedules.attempt_started, row.id, 100.0, 3, 9, 104.0)
    done = dict(status="completed", run_id=9, error=None, now=105.0, output_tail="PONG")
    assert await store.write(store.schedules.record_result, row.id, 100.0, **done)
    history = await store.read(store.schedules.run_history, row.id, 10)
    assert [(r.attempt, r.status, r.run_id, r.error) for r in history] == [
        (1, "retrying", 7, "HTTP 503"),
        (2, "retrying", 8, "interrupted: the daemon stopped during this attempt"),
        (3, "completed", 9, None),
    ]
    assert (history[2].started_at, history[2].finished_at, history[2].output_tail) == (104.0, 105.0, "PONG")
    assert [r.attempt for r in await store.read(store.schedules.run_history, row.id, 2)] == [2, 3]
    assert await store.write(store.schedules.attempt_started, "sch_0000000000", 100.0, 1, None, 1.0) is False
    again = await store.read(store.schedules.get_schedule, row.id)
    assert again is not None and again.last_status == "completed"


async def test_open_shell_runs_are_failed_at_start_and_expired_tasks_disabled(
    store: Backend, thread_id: int
) -> None:
    shell = await create(store, thread_id, executor="shell", expires_at=50.0)
    agent = await create(store, thread_id)
    for row in (shell, agent):
        await store.write(store.schedules.insert_run, row.id, 10.0, "running", None, 10.0, started_at=10.0)
    assert await store.write(store.schedules.interrupt_shell_runs, 20.0) == 1
    (record,) = await store.read(store.schedules.run_history, shell.id, 10)
    assert (record.status, record.finished_at) == ("failed", 20.0)
    assert "not run again" in (record.error or "")
    assert [r.status for r in await store.read(store.schedules.run_history, agent.id, 10)] == ["running"]
    assert await store.write(store.schedules.expire_due, 49.0) == []
    assert await store.write(store.schedules.expire_due, 50.0) == [shell.id]
    expired = await store.read(store.schedules.get_schedule, shell.id)
    assert expired is not None and (expired.enabled, expired.next_run_at, expired.last_status) == (
        False,
        None,
        "expired",
    )
