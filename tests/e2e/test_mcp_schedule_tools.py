"""The schedule tools over ``talon mcp host-tools`` with the real ``mcp`` client against ``talon
run`` in a subprocess: a task created through the bridge is picked up by the daemon's running
scheduler (``daemonSynced``), a shell task fires and its history shows how it ran, limits are
refused with what to send, and a persona without ``schedule.manage:own`` is not offered the
tools and is refused a direct call."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.e2e.daemon import TALON, Daemon, talon_env
from tests.harness import write_config
from tools.workspace.sandbox import shell_available

REPO = Path(__file__).resolve().parents[2]
OFFLINE_PROVIDER = {
    "type": "openai",
    "base_url": "http://127.0.0.1:9/v1",
    "api_key": "none",
    "max_retries": 0,
}
TOOLS = {"create_schedule", "update_schedule", "list_schedules", "get_schedule_history", "cancel_schedule"}

pytestmark = pytest.mark.skipif(not shell_available(), reason="bubblewrap cannot sandbox here")


def _params(config: Path, persona: str) -> StdioServerParameters:
    command = [*TALON, "mcp", "host-tools", "-c", str(config), "--persona", persona, "--thread", "sched"]
    return StdioServerParameters(command=command[0], args=command[1:], env=talon_env(), cwd=str(REPO))


def _json(result: Any) -> Any:
    return json.loads(result.content[0].text)


async def test_tasks_through_the_bridge_reach_the_running_scheduler(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        provider=OFFLINE_PROVIDER,
        model="fake:m",
        personas={
            "assistant": {"capabilities": ["schedule.manage:own", "shell.exec:sandbox", "fs.write:persona"]},
            "plain": {"capabilities": ["memory.access:thread"]},
        },
    )
    soon = datetime.fromtimestamp(time.time() + 1, UTC).isoformat(timespec="seconds")
    async with Daemon(config) as daemon:
        await daemon.start(tmp_path / "data")
        async with (
            asyncio.timeout(90),
            Client(_params(config, "assistant"), read_timeout_seconds=30) as client,
        ):
            listed = {t.name for t in (await client.list_tools()).tools}
            shell = _json(
                await client.call_tool(
                    "create_schedule",
                    {
                        "name": "Write a mark",
                        "executor": "shell",
                        "command": "echo marked > /shared/mark.txt; echo finished",
                        "runAt": soon,
                    },
                )
            )
            too_many = await client.call_tool(
                "create_schedule", {"name": "x", "command": "y", "cron": "0 9 * * *", "maxAttempts": 6}
            )
            bad_cron = await client.call_tool(
                "create_schedule", {"name": "x", "command": "y", "cron": "9 * *"}
            )
            records: list[dict[str, Any]] = []
            while not any(r["status"] == "ok" for r in records):
                await asyncio.sleep(0.2)
                history = await client.call_tool("get_schedule_history", {"taskId": "write-a-mark"})
                records = _json(history)["records"]
            daily = _json(
                await client.call_tool(
                    "create_schedule", {"name": "Daily", "command": "hi", "cron": "0 9 * * *"}
                )
            )
            paused = _json(await client.call_tool("cancel_schedule", {"taskId": "daily"}))
            tasks = _json(await client.call_tool("list_schedules", {}))
            removed = _json(await client.call_tool("cancel_schedule", {"taskId": "daily", "permanent": True}))
        async with asyncio.timeout(60), Client(_params(config, "plain"), read_timeout_seconds=30) as client:
            plain = {t.name for t in (await client.list_tools()).tools}
            with pytest.raises(MCPError, match="list_schedules"):
                await client.call_tool("list_schedules", {})
        assert await daemon.stop() == 0
    assert listed >= TOOLS
    assert (shell["taskId"], shell["daemonSynced"], daily["daemonSynced"]) == ("write-a-mark", True, True)
    assert too_many.is_error and "maxAttempts must be from 1 to 5; got 6" in too_many.content[0].text
    assert bad_cron.is_error and "has 3 field(s)" in bad_cron.content[0].text
    (record,) = records
    assert (record["attempt"], record["exitCode"], record["outputTail"]) == (1, 0, "finished\n")
    assert (tmp_path / "data" / "workspaces" / "assistant" / "shared" / "mark.txt").read_text() == "marked\n"
    assert (paused["enabled"], paused["daemonSynced"]) == (False, True)
    assert [(t["taskId"], t["enabled"]) for t in tasks] == [("write-a-mark", False), ("daily", False)]
    assert removed["removed"] is True
    assert not plain & TOOLS
    assert "Traceback" not in daemon.log(), daemon.log()
