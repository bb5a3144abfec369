"""schedule_manage: what a persona can create, see and change, and what it is told when wrong."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from gateway.store.db import Database, open_database
from tests.store_helpers import fetch_rows
from tests.unit.scheduler.support import add_thread, make_ctx, make_persona
from tools.base import ToolContext, ToolError
from tools.host.schedule_manage import TOOL


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    yield database
    await database.close()


@pytest.fixture
async def ctx(db: Database, tmp_path: Path) -> ToolContext:
    persona = make_persona(
        tmp_path, "alice", prompts={"daily-report": "Summarize yesterday.", "standup": "x"}
    )
    return make_ctx(db, await add_thread(db, "C1"), persona, timezone="Europe/Berlin")


async def call(ctx: ToolContext, **args: Any) -> dict[str, Any]:
    return await TOOL.handler(ctx, args)


async def stored(db: Database) -> list[dict[str, Any]]:
    return [dict(r) for r in await fetch_rows(db, "SELECT * FROM schedules ORDER BY created_at")]


def test_tool_identity() -> None:
    assert (TOOL.mcp_name, TOOL.internal_name, TOOL.prefix) == (
        "schedule_manage",
        "schedule.manage",
        "schedule.manage",
    )
    assert TOOL.input_schema["required"] == ["action"]


async def test_create_cron_in_the_callers_thread_with_next_run(ctx: ToolContext, db: Database) -> None:
    result = await call(
        ctx, action="create", cronExpr="0 9 * * *", label="Morning", prompt="Say good morning"
    )
    next_run = datetime.fromisoformat(result["nextRunAt"])
    assert (next_run.hour, next_run.minute) == (9, 0)
    assert next_run.utcoffset() == ZoneInfo("Europe/Berlin").utcoffset(next_run.replace(tzinfo=None))
    assert 0 < next_run.timestamp() - time.time() <= 86400
    assert result["timezone"] == "Europe/Berlin"  # the configured default
    assert (result["label"], result["enabled"], result["inThisThread"]) == ("Morning", True, True)
    [row] = await stored(db)
    assert (row["id"], row["persona"], row["thread_id"]) == (result["scheduleId"], "alice", ctx.thread_id)
    assert row["next_run_at"] == next_run.timestamp()


async def test_create_with_explicit_timezone(ctx: ToolContext) -> None:
    result = await call(
        ctx, action="create", cronExpr="30 7 * * 1-5", timezone="America/New_York", prompt="p"
    )
    next_run = datetime.fromisoformat(result["nextRunAt"])
    assert next_run.weekday() < 5
    assert next_run.utcoffset() in (timedelta(hours=-5), timedelta(hours=-4))


@pytest.mark.parametrize(
    "cron", ["0 9 * * * *", "0 0 9 * * * 2030", "61 9 * * *", "@daily", "0 0 31 2 *", "every day"]
)
async def test_bad_cron_is_rejected_and_nothing_stored(ctx: ToolContext, db: Database, cron: str) -> None:
    with pytest.raises(ToolError, match="5 fields: minute hour day-of-month month day-of-week"):
        await call(ctx, action="create", cronExpr=cron, prompt="p")
    assert await stored(db) == []


async def test_one_shot_in_the_schedules_timezone(ctx: ToolContext) -> None:
    when = (datetime.now(ZoneInfo("Asia/Tokyo")) + timedelta(days=2)).replace(microsecond=0, tzinfo=None)
    result = await call(
        ctx, action="create", runAt=when.isoformat(), timezone="Asia/Tokyo", prompt="remind me"
    )
    assert result["runAt"] == result["nextRunAt"] == when.isoformat() + "+09:00"
    assert result["cronExpr"] is None


async def test_one_shot_in_the_past_is_rejected(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="is in the past"):
        await call(ctx, action="create", runAt="2020-01-01T09:00:00Z", prompt="too late")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "action is required"),
        ({"action": "explode"}, "unknown action 'explode'"),
        ({"action": "create", "prompt": "p"}, "create needs cronExpr"),
        ({"action": "create", "cronExpr": "0 9 * * *"}, "send prompt"),
        ({"action": "create", "cronExpr": "0 9 * * *", "prompt": "p", "promptFile": "standup"}, "not both"),
        (
            {"action": "create", "cronExpr": "0 9 * * *", "runAt": "2099-01-01T00:00", "prompt": "p"},
            "not both",
        ),
        ({"action": "create", "cron": "0 9 * * *", "prompt": "p"}, "unknown argument"),
        (
            {"action": "create", "cronExpr": "0 9 * * *", "prompt": "p", "timezone": "Moon/Base"},
            "unknown timezone",
        ),
        ({"action": "create", "cronExpr": 9, "prompt": "p"}, "cronExpr must be a string"),
        ({"action": "update"}, "update needs scheduleId"),
        ({"action": "cancel", "scheduleId": "sch_nope"}, "no schedule 'sch_nope'"),
    ],
)
async def test_bad_arguments_get_a_clear_error(ctx: ToolContext, args: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolError, match=message):
        await TOOL.handler(ctx, args)


@pytest.mark.parametrize("alias", ["../secrets", "/etc/passwd", "prompts/daily-report", "..", "missing"])
async def test_prompt_file_must_be_an_alias_of_the_persona(
    ctx: ToolContext, db: Database, alias: str
) -> None:
    outside = ctx.persona.path.parent / "secrets.md"
    outside.write_text("not yours", encoding="utf-8")
    with pytest.raises(ToolError) as err:
        await call(ctx, action="create", cronExpr="0 9 * * *", promptFile=alias)
    assert "one of: daily-report, standup" in str(err.value)
    assert await stored(db) == []


async def test_prompt_file_alias_is_stored(ctx: ToolContext, db: Database) -> None:
    result = await call(ctx, action="create", cronExpr="0 9 * * *", promptFile="daily-report.md")
    assert (result["promptFile"], result["prompt"]) == ("daily-report", None)
    assert (await stored(db))[0]["prompt_file"] == "daily-report"


async def test_cancel_update_and_delete(ctx: ToolContext, db: Database) -> None:
    sid = (await call(ctx, action="create", cronExpr="0 9 * * *", prompt="p", label="a"))["scheduleId"]

    canceled = await call(ctx, action="cancel", scheduleId=sid)
    assert (canceled["enabled"], canceled["nextRunAt"]) == (False, None)

    relabeled = await call(ctx, action="update", scheduleId=sid, label="b")
    assert (relabeled["label"], relabeled["enabled"], relabeled["nextRunAt"]) == ("b", False, None)

    resumed = await call(ctx, action="update", scheduleId=sid, enabled=True, cronExpr="15 18 * * *")
    assert resumed["enabled"] is True
    assert resumed["nextRunAt"] is not None and "T18:15:00" in resumed["nextRunAt"]
    assert resumed["cronExpr"] == "15 18 * * *"

    switched = await call(ctx, action="update", scheduleId=sid, prompt="new text")
    assert (switched["prompt"], switched["nextRunAt"]) == ("new text", resumed["nextRunAt"])

    assert await call(ctx, action="delete", scheduleId=sid) == {"scheduleId": sid, "deleted": True}
    assert await stored(db) == []
    with pytest.raises(ToolError, match="no schedule"):
        await call(ctx, action="delete", scheduleId=sid)


async def test_list_shows_own_schedules_with_status(ctx: ToolContext) -> None:
    first = await call(ctx, action="create", cronExpr="0 9 * * *", prompt="p", label="one")
    await call(ctx, action="create", cronExpr="0 10 * * *", prompt="q", label="two")
    await call(ctx, action="cancel", scheduleId=first["scheduleId"])
    listed = (await call(ctx, action="list"))["schedules"]
    assert [(s["label"], s["enabled"], s["nextRunAt"] is None) for s in listed] == [
        ("one", False, True),
        ("two", True, False),
    ]
    assert all("lastStatus" in s for s in listed)


async def test_another_personas_schedule_is_invisible(ctx: ToolContext, db: Database, tmp_path: Path) -> None:
    bob = make_ctx(db, await add_thread(db, "C2", persona="bob"), make_persona(tmp_path, "bob"))
    theirs = (await call(bob, action="create", cronExpr="0 9 * * *", prompt="bob's job"))["scheduleId"]

    assert (await call(ctx, action="list"))["schedules"] == []
    for action, extra in (("update", {"label": "mine now"}), ("cancel", {}), ("delete", {})):
        with pytest.raises(ToolError, match=f"no schedule '{theirs}'"):
            await call(ctx, action=action, scheduleId=theirs, **extra)
    [row] = await stored(db)
    assert (row["persona"], row["enabled"], row["label"]) == ("bob", 1, None)
