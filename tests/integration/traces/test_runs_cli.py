"""``talon runs`` on a real database: the recent runs with their counts, one run's events in
order, a thread filter, and clear errors for a run that does not exist or a bad limit."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway.cli import main
from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, say, tool_results, write_config


def _responder(body: dict[str, Any]) -> Reply:
    if not tool_results(body):
        return Reply(
            tool_calls=[Call("state_get", {"namespace": "n", "key": "k", "scope": "team"})],
            input_tokens=100,
            output_tokens=10,
        )
    return Reply(text="nothing there", input_tokens=150, output_tokens=5)


async def _two_runs(tmp_path: Path) -> tuple[Path, int, int]:
    personas = {"assistant": {"capabilities": ["state.read:team"]}}
    async with FakeAnthropic(responder=_responder) as fake:
        config = write_config(tmp_path, provider=provider_for(fake), personas=personas)
        async with running_gateway(config) as gw:
            first = await say(gw, "look it up")
            second = await say(gw, "and here", thread="other")
    assert first.intake.thread_id is not None and second.intake.thread_id is not None
    return config, first.intake.thread_id, second.intake.thread_id


async def test_runs_lists_recent_runs_and_shows_one_runs_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, first_thread, second_thread = await _two_runs(tmp_path)
    assert await asyncio.to_thread(main, ["runs", "-c", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "ID",
        "THREAD",
        "PERSONA",
        "STARTED",
        "DURATION",
        "MODEL",
        "TOOLS",
        "TOKENS",
        "OUTCOME",
    ]
    rows = [line.split() for line in lines[1:]]
    assert [(r[1], r[2], r[-4], r[-3], r[-2], r[-1]) for r in rows] == [
        (str(second_thread), "assistant", "2", "1", "265", "completed"),
        (str(first_thread), "assistant", "2", "1", "265", "completed"),
    ]
    newest = rows[0][0]

    assert await asyncio.to_thread(main, ["runs", "-c", str(config), "--thread", str(first_thread)]) == 0
    only = capsys.readouterr().out.splitlines()[1:]
    assert len(only) == 1 and only[0].split()[1] == str(first_thread)

    assert await asyncio.to_thread(main, ["runs", "-c", str(config), newest]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(
        f"run {newest} · thread {second_thread} · assistant · fake:test-model · completed"
    )
    events = [line.split()[2:4] for line in out[2:]]
    assert events == [
        ["phase", "turn_started"],
        ["model_call", "test-model"],
        ["tool_call", "state_get"],
        ["model_call", "test-model"],
        ["phase", "turn_ended"],
    ]
    assert "input_tokens=100" in out[3] and "decision=allowed" in out[4]


async def test_an_unknown_run_or_a_bad_limit_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, _, _ = await _two_runs(tmp_path)
    assert await asyncio.to_thread(main, ["runs", "-c", str(config), "999"]) == 1
    assert capsys.readouterr().err.strip() == "talon: no run 999; `talon runs` lists the recent ones"
    with pytest.raises(SystemExit):
        await asyncio.to_thread(main, ["runs", "-c", str(config), "--limit", "0"])
    assert "give a whole number from 1 to 1000" in capsys.readouterr().err
