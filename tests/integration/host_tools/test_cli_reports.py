"""``talon audit`` and ``talon schedules`` read the database as an operator would."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gateway.cli import main
from tests.integration.host_tools.conftest import make_bridge_env


def _prepare(tmp_path: Path) -> None:
    async def run() -> None:
        env = await make_bridge_env(
            tmp_path, {"assistant": {"capabilities": ["schedule.manage:own", "memory.access:thread"]}}
        )
        try:
            identity = env.register("assistant")
            created = await env.bridge.call(
                identity,
                "schedule_manage",
                {
                    "action": "create",
                    "cronExpr": "0 9 * * 1-5",
                    "timezone": "Europe/Berlin",
                    "label": "standup",
                    "prompt": "Post the standup reminder",
                },
            )
            assert not created.is_error, created.content
            await env.bridge.call(identity, "memory_access", {"operation": "read"})
            await env.bridge.call(identity, "db_query", {"sql": "SELECT 1"})
        finally:
            await env.close()

    asyncio.run(run())


def test_audit_lists_recent_decisions_newest_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _prepare(tmp_path)
    assert main(["audit", "-c", str(tmp_path / "talon.yaml"), "--limit", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["TIME", "RUN", "THREAD", "PERSONA", "TOOL", "DECISION", "STATUS", "DETAIL"]
    assert len(lines) == 4
    assert "db_query" in lines[1] and "refused" in lines[1] and "does not hold" in lines[1]
    assert "memory_access" in lines[2] and "result" in lines[2] and "error" in lines[2]
    assert "memory_access" in lines[3] and "allowed" in lines[3] and "args: operation" in lines[3]


def test_schedules_lists_every_schedule_with_its_next_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _prepare(tmp_path)
    assert main(["schedules", "-c", str(tmp_path / "talon.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["ID", "PERSONA", "LABEL", "WHEN"]
    (row,) = lines[1:]
    assert row.startswith("sch_") and "assistant" in row and "standup" in row
    assert "0 9 * * 1-5" in row and "Europe/Berlin" in row and " yes " in row
    assert "T09:00:00+" in row  # the next run, in the schedule's timezone


def test_reports_without_a_database_fail_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "talon.yaml").write_text(json.dumps({"data_dir": "data"}))
    assert main(["audit", "-c", str(tmp_path / "talon.yaml")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no database at" in err and "talon run" in err
