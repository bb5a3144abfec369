"""The full schedule tools: what a persona can create, see, change and cancel, and what it is
told when an argument is wrong."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.config import Settings
from gateway.store import schedules
from gateway.store.db import Database, open_database
from tests.unit.scheduler.support import add_thread, make_persona
from tools.base import ToolContext, ToolError
from tools.host.schedule_manage import TOOL as SCHEDULE_MANAGE
from tools.schedules import managing, writing
from tools.workspace.sandbox import shell_available


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    yield database
    await database.close()


def settings(tmp_path: Path) -> Settings:
    return Settings.model_validate(
        {
            "data_dir": str(tmp_path / "data"),
            "timezone": "Europe/Berlin",
            "channels": [
                {"name": "console", "type": "console"},
                {
                    "name": "team-telegram",
                    "type": "telegram",
                    "token": "123:abc",
                    "allowed_chats": ["100", "200"],
                    "home_chat": "100",
                },
                {"name": "team-slack", "type": "slack", "bot_token": "xoxb-1", "app_token": "xapp-1"},
            ],
        }
    )


@pytest.fixture
async def ctx(db: Database, tmp_path: Path) -> ToolContext:
    persona = make_persona(tmp_path, "alice")
    return ToolContext(
        thread_id=await add_thread(db, "C1"), persona=persona, db=db, settings=settings(tmp_path)
    )


def with_labels(ctx: ToolContext, *labels: str) -> ToolContext:
    persona = dataclasses.replace(ctx.persona, capabilities=("schedule.manage:own", *labels))
    return dataclasses.replace(ctx, persona=persona)


def later(**delta: float) -> str:
    return (datetime.now(UTC) + timedelta(**delta)).isoformat(timespec="seconds")


async def create(ctx: ToolContext, **args: Any) -> dict[str, Any]:
    return await writing.CREATE.handler(ctx, {"name": "Nightly cleanup", "command": "tidy up", **args})


async def test_create_returns_a_slug_task_with_its_next_run_and_honest_sync(ctx: ToolContext) -> None:
    task = await create(ctx, cron="0 2 * * *")
    again = await create(ctx, cron="0 3 * * *")
    assert (task["taskId"], again["taskId"]) == ("nightly-cleanup", "nightly-cleanup-2")
    assert task["nextRunAt"].endswith(("+01:00", "+02:00"))  # talon.yaml's timezone
    assert task["nextRunAt"][11:16] == "02:00"
    assert (task["executor"], task["notifyOn"], task["maxAttempts"], task["retryDelayMs"]) == (
        "agent",
        "failure",
        1,
        30000,
    )
    assert task["daemonSynced"] is False  # no scheduler runs on this database
    assert "next start" in task["syncDetail"]


async def test_a_one_shot_disables_after_expiry_checks_and_keeps_its_id_when_renamed(
    ctx: ToolContext,
) -> None:
    task = await create(ctx, runAt=later(hours=1), expiresAt=later(hours=2), notifyOn="always")
    updated = await writing.UPDATE.handler(
        ctx, {"taskId": task["taskId"], "name": "Renamed", "maxAttempts": 3}
    )
    assert updated["taskId"] == task["taskId"] == "nightly-cleanup"
    assert (updated["name"], updated["maxAttempts"], updated["notifyOn"]) == ("Renamed", 3, "always")
    assert updated["runAt"] == task["runAt"] == updated["nextRunAt"]
    cleared = await writing.UPDATE.handler(ctx, {"taskId": task["taskId"], "expiresAt": None})
    assert cleared["expiresAt"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"cron": "0 2 * *"}, "has 4 field(s)"),
        ({"cron": "61 2 * * *"}, "is not valid"),
        ({}, "send cron"),
        ({"runAt": "yesterday"}, "not an ISO 8601"),
        ({"cron": "0 2 * * *", "maxAttempts": 6}, "maxAttempts must be from 1 to 5; got 6"),
        ({"cron": "0 2 * * *", "maxAttempts": 2.5}, "maxAttempts must be a whole number"),
        ({"cron": "0 2 * * *", "retryDelayMs": 999}, "retryDelayMs must be from 1000 to 300000"),
        ({"cron": "0 2 * * *", "notifyOn": "sometimes"}, "notifyOn must be"),
        ({"cron": "0 2 * * *", "executor": "cron"}, "executor must be"),
        ({"cron": "0 2 * * *", "trigger": "sessionstart"}, "no session starts"),
        ({"cron": "0 2 * * *", "expiresAt": "2001-01-01T00:00"}, "expiresAt"),
        ({"cron": "0 2 * * *", "cwd": "/shared"}, "cwd is only for executor 'shell'"),
    ],
)
async def test_bad_arguments_are_refused_with_what_to_send(
    ctx: ToolContext, args: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolError, match=message.replace("(", r"\(").replace(")", r"\)")):
        await create(ctx, **args)
    assert await ctx.db.read(schedules.persona_schedules, "alice") == []


async def test_run_at_a_little_late_is_accepted_far_in_the_past_refused(ctx: ToolContext) -> None:
    recent = await create(ctx, runAt=later(seconds=-30))
    assert recent["enabled"] is True and recent["nextRunAt"] == recent["runAt"]
    with pytest.raises(ToolError, match="more than 600 s in the past"):
        await create(ctx, runAt=later(hours=-2))


@pytest.mark.parametrize(
    ("chat", "stored", "message"),
    [
        ("team-telegram", "team-telegram", None),
        ("team-telegram:200", "team-telegram:200", None),
        ("C1", "console:C1", None),
        ("nowhere:1", None, "channel 'nowhere', which is not configured"),
        ("team-telegram:999", None, "not among the allowed chats"),
        ("team-slack", None, "has no home_chat"),
    ],
)
async def test_notify_chat_must_be_a_chat_talon_may_post_to(
    ctx: ToolContext, chat: str, stored: str | None, message: str | None
) -> None:
    ctx = with_labels(ctx, "channel.send:team-telegram")
    if message is None:
        assert (await create(ctx, cron="0 2 * * *", notifyChat=chat))["notifyChat"] == stored
    else:
        with pytest.raises(ToolError, match=message):
            await create(ctx, cron="0 2 * * *", notifyChat=chat)


async def test_notify_chat_in_another_channel_needs_its_channel_send_label(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match=r"needs channel.send:team-telegram"):
        await create(ctx, cron="0 2 * * *", notifyChat="team-telegram")


async def test_a_shell_task_needs_the_shell_label(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match=r"needs the label shell\.exec:sandbox"):
        await create(ctx, cron="0 2 * * *", executor="shell")
    task = await create(ctx, cron="0 2 * * *")
    with pytest.raises(ToolError, match=r"needs the label shell\.exec:sandbox"):
        await writing.UPDATE.handler(ctx, {"taskId": task["taskId"], "executor": "shell"})


@pytest.mark.skipif(not shell_available(), reason="bubblewrap cannot sandbox here")
async def test_a_shell_task_runs_only_inside_the_workspace(ctx: ToolContext) -> None:
    ctx = with_labels(ctx, "shell.exec:sandbox", "fs.write:persona")
    shared = ctx.settings.data_path / "workspaces" / "alice" / "shared"
    (shared / "reports").mkdir(parents=True)
    task = await create(ctx, cron="0 2 * * *", executor="shell", cwd="/shared/reports")
    assert (task["executor"], task["cwd"]) == ("shell", "/shared/reports")
    for bad, message in [
        ("/etc", "outside the workspace; send a directory under /shared and /workspace"),
        ("/shared/../..", "must not contain '..'"),
        ("/shared/missing", "not an existing directory"),
    ]:
        with pytest.raises(ToolError, match=message):
            await create(ctx, cron="0 2 * * *", executor="shell", cwd=bad)
    (shared / "out").symlink_to("/etc")
    with pytest.raises(ToolError, match="leads outside the workspace"):
        await create(ctx, cron="0 2 * * *", executor="shell", cwd="/shared/out")


async def test_list_history_and_cancel_see_schedule_manage_rows_too(ctx: ToolContext) -> None:
    old = await SCHEDULE_MANAGE.handler(ctx, {"action": "create", "cronExpr": "0 9 * * *", "prompt": "hi"})
    await create(ctx, cron="0 2 * * *")
    listed = await managing.LIST.handler(ctx, {})
    assert [t["taskId"] for t in listed] == [old["scheduleId"], "nightly-cleanup"]
    off = await managing.CANCEL.handler(ctx, {"taskId": old["scheduleId"]})
    assert (off["enabled"], off["nextRunAt"]) == (False, None)
    on = await managing.CANCEL.handler(ctx, {"taskId": old["scheduleId"], "enable": True})
    assert on["enabled"] is True and on["nextRunAt"]
    gone = await managing.CANCEL.handler(
        ctx, {"taskId": "nightly-cleanup", "permanent": True, "enable": True}
    )
    assert gone["removed"] is True
    assert [t["taskId"] for t in await managing.LIST.handler(ctx, {})] == [old["scheduleId"]]
    listing = await SCHEDULE_MANAGE.handler(ctx, {"action": "list"})
    assert [s["scheduleId"] for s in listing["schedules"]] == [old["scheduleId"]]


async def test_history_is_oldest_first_per_attempt_and_bounded(ctx: ToolContext) -> None:
    task = await create(ctx, cron="* * * * *", maxAttempts=3)
    row = await ctx.db.read(schedules.get_task, "alice", task["taskId"])
    assert row is not None
    now = time.time()
    for i in range(3):
        due = now + 60 * i
        await ctx.db.run_transaction(schedules.insert_run, row.id, due, "queued", None, now)
        await ctx.db.run_transaction(schedules.attempt_started, row.id, due, 1, None, now)
        status = "retrying" if i == 2 else "completed"
        await ctx.db.run_transaction(
            schedules.record_result,
            row.id,
            due,
            status=status,
            run_id=None,
            error=None,
            now=now,
            output_tail="x",
        )
    await ctx.db.run_transaction(schedules.attempt_started, row.id, now + 120, 2, None, now + 1)
    history = await managing.HISTORY.handler(ctx, {"taskId": task["taskId"]})
    assert [(r["attempt"], r["status"]) for r in history["records"]] == [
        (1, "ok"),
        (1, "ok"),
        (1, "retrying"),
        (2, "running"),
    ]
    two = await managing.HISTORY.handler(ctx, {"taskId": task["taskId"], "limit": 2})
    assert [(r["attempt"], r["status"]) for r in two["records"]] == [(1, "retrying"), (2, "running")]
    with pytest.raises(ToolError, match="limit must be from 1 to 50; got 51"):
        await managing.HISTORY.handler(ctx, {"taskId": task["taskId"], "limit": 51})


async def test_another_personas_task_is_unknown(ctx: ToolContext, tmp_path: Path) -> None:
    await create(ctx, cron="0 2 * * *")
    bob = dataclasses.replace(ctx, persona=make_persona(tmp_path, "bob"))
    assert await managing.LIST.handler(bob, {}) == []
    for tool, args in [
        (managing.HISTORY, {}),
        (managing.CANCEL, {"permanent": True}),
        (writing.UPDATE, {"enabled": False}),
    ]:
        with pytest.raises(ToolError, match="no task 'nightly-cleanup' for this persona"):
            await tool.handler(bob, {"taskId": "nightly-cleanup", **args})
    assert len(await managing.LIST.handler(ctx, {})) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"notifyChat": "x" * 100_000}, "notifyChat is longer than 200"),
        ({"cwd": "/shared/" + "a" * 100_000, "executor": "agent"}, "cwd is only for executor"),
        ({"runAt": "2" * 100_000}, "runAt is not an ISO 8601 time"),
        ({"timezone": "Z" * 100_000}, "timezone must be an IANA name"),
        ({"name": "n" * 100_000}, "name is 100000 characters"),
        ({"command": "c" * 100_000}, "command must be at most 16,000 characters"),
    ],
)
async def test_huge_arguments_are_refused_without_being_echoed(
    ctx: ToolContext, args: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolError, match=message) as refused:
        await create(ctx, cron="0 2 * * *", **args)
    assert len(str(refused.value)) < 500
