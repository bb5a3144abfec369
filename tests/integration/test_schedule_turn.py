"""The schedule tools in real turns: the fake model creates a one-shot task, is refused a bad
change with what to send, lists and reads its history; the task fires a turn of its own in the
conversation and its reply is posted there. A persona without ``schedule.manage:own`` is not
offered the tools."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gateway.daemon import Gateway
from gateway.store import schedules
from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.fakes.model_script import last_user_text
from tests.harness import provider_for, running_gateway, say, tool_results, write_config

TOOLS = {"create_schedule", "update_schedule", "list_schedules", "get_schedule_history", "cancel_schedule"}


def _soon(seconds: float) -> str:
    return datetime.fromtimestamp(time.time() + seconds, UTC).isoformat(timespec="seconds")


async def test_a_turn_schedules_a_task_that_later_runs_in_the_conversation(tmp_path: Path) -> None:
    steps = [
        Call("create_schedule", {"name": "Ping", "command": "Answer PONG", "runAt": _soon(1)}),
        Call("update_schedule", {"taskId": "ping", "maxAttempts": 6}),
        Call("update_schedule", {"taskId": "ping", "maxAttempts": 2, "retryDelayMs": 1000}),
        Call("list_schedules", {}),
    ]

    def respond(body: dict[str, Any]) -> Reply:
        if "[scheduled task «Ping»]" in last_user_text(body):
            return Reply(text="PONG")
        results = tool_results(body)
        if len(results) < len(steps):
            return Reply(tool_calls=[steps[len(results)]])
        created, refused, updated, listed = results
        task, tasks = json.loads(created[1]), json.loads(listed[1])
        return Reply(
            text=f"created {task['taskId']} synced={task['daemonSynced']}; refused={refused[0]}: {refused[1]}; "
            f"attempts={json.loads(updated[1])['maxAttempts']}; listed={[t['taskId'] for t in tasks]}"
        )

    async with FakeAnthropic(responder=respond) as fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            personas={"assistant": {"capabilities": ["schedule.manage:own"]}},
        )
        async with running_gateway(config) as gw:
            turn = await say(gw, "ping me in a second")
            async with asyncio.timeout(30):
                while not any("[scheduled task «Ping»]" in last_user_text(b) for b in fake.requests):
                    await asyncio.sleep(0.1)
            history: list[dict[str, Any]] = []
            async with asyncio.timeout(30):
                while not history or history[-1]["status"] != "ok":
                    await asyncio.sleep(0.1)
                    history = await _history(gw)
        tools = {t["name"] for t in fake.requests[0]["tools"]}
    assert TOOLS <= tools
    assert turn.text == (
        "created ping synced=True; refused=True: maxAttempts must be from 1 to 5; got 6; "
        "attempts=2; listed=['ping']"
    )
    assert [(r["attempt"], r["status"], r["outputTail"]) for r in history] == [(1, "ok", "PONG")]


async def _history(gw: Gateway) -> list[dict[str, Any]]:
    db = gw.components.db
    row = await db.read(schedules.get_task, "assistant", "ping")
    assert row is not None
    records = await db.read(schedules.run_history, row.id, 10)
    return [
        {
            "attempt": r.attempt,
            "status": "ok" if r.status == "completed" else r.status,
            "outputTail": r.output_tail,
        }
        for r in records
    ]


async def test_a_persona_without_the_label_is_not_offered_the_tools(tmp_path: Path) -> None:
    async with FakeAnthropic(responder=lambda body: Reply(text="ok")) as fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            personas={"assistant": {"capabilities": ["memory.access:thread"]}},
        )
        async with running_gateway(config) as gw:
            await say(gw, "hello")
        tools = {t["name"] for t in fake.requests[0].get("tools", [])}
    assert not tools & TOOLS
