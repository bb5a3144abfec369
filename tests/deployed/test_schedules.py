"""Schedules as deployed: ``talon run`` as a subprocess with the Telegram stand-in in its own
process and a scripted model in the test's. The model creates the tasks with create_schedule
from a chat message, as a user would have it do.

- A one-shot ``runAt`` fires once across restarts: the daemon is killed (-9) before it is due
  and again while its turn is at the model; the chat gets exactly one post.
- A flaky model (503 twice, the provider's own retries off) under ``maxAttempts: 3`` leaves a
  history of two ``retrying`` attempts and a final ``ok``, read back with get_schedule_history,
  and ``notifyOn: always`` posts into another chat.
- A shell task writes a file in /shared; its history has the exit code and the output's tail.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deployed.support import (
    deployed_daemon,
    fake_process,
    get_json,
    log_failures,
    post_json,
    write_deployed_config,
)
from tests.fakes.model_api import Call, Error, FakeAnthropic, Reply
from tests.fakes.model_script import Step, last_user_text
from tools.workspace.sandbox import shell_available

pytestmark = pytest.mark.timeout(240)

CHAT = 4242
OTHER_CHAT = 5151


def _at(seconds: float) -> str:
    return datetime.fromtimestamp(time.time() + seconds, UTC).isoformat(timespec="seconds")


def _tool_result(body: dict[str, Any]) -> str | None:
    """The text of the tool result the request ends with, if it ends with one."""
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content") if isinstance(last, dict) else None
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            inner = block.get("content", "")
            return inner if isinstance(inner, str) else "".join(c.get("text", "") for c in inner)
    return None


def _bot(tmp: Path, bot_api: Any, model: FakeAnthropic, labels: list[str]) -> Path:
    config = write_deployed_config(
        tmp,
        model_url=model.base_url,
        model_kind="anthropic",
        channels=[
            {
                "name": "team-telegram",
                "type": "telegram",
                "token": bot_api.info["token"],
                "api_base_url": bot_api.url,
            }
        ],
        # Each 503 ends the attempt: the schedule's maxAttempts is what retries it.
        providers={
            "local": {"type": "anthropic", "base_url": model.base_url, "api_key": "none", "max_retries": 0}
        },
    )
    persona = tmp / "personas" / "assistant" / "persona.yaml"
    persona.write_text(
        yaml.safe_dump({"model": "local:test-model", "capabilities": labels}), encoding="utf-8"
    )
    return config


async def _sent(bot_api: Any, chat: int = CHAT) -> list[str]:
    return list((await get_json(f"{bot_api.url}/_fake/sent")).get(str(chat), []))


async def _say(bot_api: Any, text: str) -> None:
    await post_json(
        f"{bot_api.url}/_fake/inject", {"messages": [{"chat_id": CHAT, "user_id": CHAT, "text": text}]}
    )


async def _until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


def _rows(data: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{data / 'talon.db'}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


async def test_a_one_shot_run_at_fires_once_across_kill_9_restarts(tmp_path: Path) -> None:
    scheduled_calls: list[float] = []

    def respond(body: dict[str, Any]) -> Step:
        result, text = _tool_result(body), last_user_text(body)
        if result is not None:
            return Reply(text=f"scheduled: {json.loads(result)['taskId']}")
        if "[scheduled task «Tea»]" in text:
            scheduled_calls.append(time.time())
            # The first time, hold the answer so the daemon can be killed mid-turn.
            return Reply(text="TEA TIME", delay=60 if len(scheduled_calls) == 1 else 0)
        if "remind me" in text:
            return Reply(
                tool_calls=[
                    Call("create_schedule", {"name": "Tea", "command": "Say TEA TIME", "runAt": _at(4)})
                ]
            )
        return Reply(text=f"echo: {text}")

    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path) as bot_api,
        FakeAnthropic(responder=respond) as model,
    ):
        config = _bot(tmp_path, bot_api, model, ["schedule.manage:own"])
        async with deployed_daemon(config) as daemon:
            await _say(bot_api, "remind me about tea")
            await _until(lambda: _has(bot_api, "scheduled: tea"), 30, "the task to be created")
            await daemon.kill()  # before it is due
        await asyncio.sleep(5)  # runAt passes while the daemon is down
        async with deployed_daemon(config) as daemon:
            await _until(lambda: asyncio.sleep(0, scheduled_calls), 30, "the scheduled turn")
            await daemon.kill()  # its turn is at the model
        async with deployed_daemon(config) as daemon:
            await _until(lambda: _has(bot_api, "TEA TIME"), 60, "the scheduled post")
            await asyncio.sleep(3)  # time for a wrong second firing to show
            assert await daemon.stop() == 0
            log = daemon.log()
        sent = await _sent(bot_api)

    assert sent.count("TEA TIME") == 1, sent
    assert len(scheduled_calls) == 2  # the killed turn ran again, nothing fired twice
    data = tmp_path / "data"
    assert _rows(data, "SELECT task_id, enabled, next_run_at FROM schedules") == [("tea", 0, None)]
    assert [r[0] for r in _rows(data, "SELECT status FROM schedule_runs")] == ["retrying", "completed"]
    assert log_failures(log) == []


async def _has(bot_api: Any, text: str, chat: int = CHAT) -> bool:
    return any(text in t for t in await _sent(bot_api, chat))


async def test_history_records_transient_failures_retried_and_the_final_ok(tmp_path: Path) -> None:
    failures = [Error(503), Error(503)]

    def respond(body: dict[str, Any]) -> Step:
        result, text = _tool_result(body), last_user_text(body)
        if result is not None and "history please" in text:
            records = json.loads(result)["records"]
            return Reply(text="history: " + ", ".join(f"{r['attempt']}:{r['status']}" for r in records))
        if result is not None:
            return Reply(text=f"scheduled: {json.loads(result)['taskId']}")
        if "[scheduled task «Flaky»]" in text:
            return failures.pop(0) if failures else Reply(text="FLAKY DONE")
        if "flaky job" in text:
            task = {
                "name": "Flaky",
                "command": "Say FLAKY DONE",
                "runAt": _at(2),
                "maxAttempts": 3,
                "retryDelayMs": 1000,
                "notifyOn": "always",
                "notifyChat": f"team-telegram:{OTHER_CHAT}",
            }
            return Reply(tool_calls=[Call("create_schedule", task)])
        if "history please" in text:
            return Reply(tool_calls=[Call("get_schedule_history", {"taskId": "flaky"})])
        return Reply(text=f"echo: {text}")

    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path) as bot_api,
        FakeAnthropic(responder=respond) as model,
    ):
        config = _bot(tmp_path, bot_api, model, ["schedule.manage:own", "channel.send:team-telegram"])
        async with deployed_daemon(config) as daemon:
            # The Bot API stand-in knows only chats it has heard from.
            await post_json(
                f"{bot_api.url}/_fake/inject",
                {"messages": [{"chat_id": OTHER_CHAT, "user_id": OTHER_CHAT, "text": "hi"}]},
            )
            await _until(lambda: _has(bot_api, "echo: hi", OTHER_CHAT), 30, "the other chat's answer")
            await _say(bot_api, "set up the flaky job")
            await _until(lambda: _has(bot_api, "scheduled: flaky"), 30, "the task to be created")
            await _until(lambda: _has(bot_api, "FLAKY DONE"), 60, "the third attempt's post")
            await _until(
                lambda: _has(bot_api, "«Flaky» ran: ok after 3 attempts", OTHER_CHAT), 30, "the notice"
            )
            await _say(bot_api, "history please")
            await _until(lambda: _has(bot_api, "history: "), 30, "the history")
            assert await daemon.stop() == 0
            log = daemon.log()
        sent = await _sent(bot_api)

    assert "history: 1:retrying, 2:retrying, 3:ok" in sent
    assert sent.count("FLAKY DONE") == 1
    errors = [r[0] for r in _rows(tmp_path / "data", "SELECT error FROM schedule_runs ORDER BY attempt")]
    assert "503" in errors[0] and "next attempt in" in errors[0] and errors[2] is None
    assert log_failures(log) == []


@pytest.mark.skipif(not shell_available(), reason="bubblewrap cannot sandbox here")
async def test_a_shell_task_writes_in_shared_and_its_history_has_exit_code_and_output(tmp_path: Path) -> None:
    def respond(body: dict[str, Any]) -> Step:
        result, text = _tool_result(body), last_user_text(body)
        if result is not None and "history please" in text:
            (record,) = json.loads(result)["records"]
            return Reply(
                text=f"history: {record['status']} exit {record['exitCode']} tail {record['outputTail']!r}"
            )
        if result is not None:
            return Reply(text=f"scheduled: {json.loads(result)['taskId']}")
        if "stamp it" in text:
            task = {
                "name": "Stamp",
                "executor": "shell",
                "command": "echo stamped > stamp.txt && echo wrote the stamp",
                "cwd": "/shared",
                "runAt": _at(2),
                "notifyOn": "always",
            }
            return Reply(tool_calls=[Call("create_schedule", task)])
        if "history please" in text:
            return Reply(tool_calls=[Call("get_schedule_history", {"taskId": "stamp"})])
        return Reply(text=f"echo: {text}")

    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path) as bot_api,
        FakeAnthropic(responder=respond) as model,
    ):
        labels = ["schedule.manage:own", "shell.exec:sandbox", "fs.write:persona"]
        config = _bot(tmp_path, bot_api, model, labels)
        async with deployed_daemon(config) as daemon:
            await _say(bot_api, "stamp it")
            await _until(lambda: _has(bot_api, "scheduled: stamp"), 30, "the task to be created")
            await _until(lambda: _has(bot_api, "«Stamp» ran: exit code 0"), 60, "the shell run's notice")
            await _say(bot_api, "history please")
            await _until(lambda: _has(bot_api, "history: "), 30, "the history")
            assert await daemon.stop() == 0
            log = daemon.log()
        sent = await _sent(bot_api)
        model_calls = len(model.requests)

    stamp = tmp_path / "data" / "workspaces" / "assistant" / "shared" / "stamp.txt"
    assert stamp.read_text(encoding="utf-8") == "stamped\n"
    assert "history: ok exit 0 tail 'wrote the stamp\\n'" in sent
    notice = next(t for t in sent if "«Stamp» ran" in t)
    assert "wrote the stamp" in notice
    assert model_calls == 4  # two turns of two calls each: the shell run itself asked no model
    assert log_failures(log) == []
