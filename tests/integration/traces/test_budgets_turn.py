"""Budgets in real turns: a model that never stops calling tools is wound down at its
persona's budget (tool rounds, tokens, wall time) with one last call that is told why, and
the user gets its answer with the reason; the trace records the budget event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, say, write_config
from tests.store_helpers import fetch_rows

TOOL = Call("state_get", {"namespace": "n", "key": "k", "scope": "team"})


def _tireless(delay: float = 0.0, input_tokens: int = 50) -> Any:
    """Calls a tool every time, except when told its budget ran out."""

    def respond(body: dict[str, Any]) -> Reply:
        if "[budget]" in json.dumps(body.get("system", "")):
            return Reply(text="Here is what I found so far.", input_tokens=10, output_tokens=5)
        return Reply(tool_calls=[TOOL], delay=delay, input_tokens=input_tokens, output_tokens=5)

    return respond


async def _run(tmp_path: Path, budgets: dict[str, Any], responder: Any) -> tuple[str, int, list[Any]]:
    personas = {"assistant": {"capabilities": ["state.read:team"], "budgets": budgets}}
    async with FakeAnthropic(responder=responder) as fake:
        config = write_config(tmp_path, provider=provider_for(fake), personas=personas)
        async with running_gateway(config) as gw:
            turn = await say(gw, "find it")
            rows = await fetch_rows(gw.components.db, "SELECT * FROM run_events ORDER BY seq")
        calls = len(fake.requests)
    assert turn.status == "completed"
    return turn.text, calls, rows


def _budget_events(rows: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(r["name"], json.loads(r["payload"])) for r in rows if r["kind"] == "budget"]


async def test_a_model_that_always_calls_a_tool_stops_at_max_tool_rounds(tmp_path: Path) -> None:
    text, calls, rows = await _run(tmp_path, {"max_tool_rounds": 3}, _tireless())
    assert (
        text == "Here is what I found so far.\n\n(Stopped early: this run used its budget of 3 tool rounds.)"
    )
    assert calls == 4  # three rounds, then the wind-down call
    assert sum(r["kind"] == "tool_call" for r in rows) == 3
    [(name, payload)] = _budget_events(rows)
    assert name == "max_tool_rounds" and payload["used"]["tool_rounds"] == 3


async def test_the_token_budget_counts_every_model_call(tmp_path: Path) -> None:
    text, calls, rows = await _run(tmp_path, {"max_tokens": 1000}, _tireless(input_tokens=400))
    assert text.endswith("(Stopped early: this run used its budget of 1,000 tokens.)")
    assert calls == 4  # 405, 810, then 1215 passes 1000: the fourth call winds down
    [(name, payload)] = _budget_events(rows)
    assert name == "max_tokens" and payload["used"]["tokens"] == 1215


async def test_the_wall_time_budget_winds_a_slow_run_down(tmp_path: Path) -> None:
    text, calls, rows = await _run(tmp_path, {"max_wall_seconds": 0.5}, _tireless(delay=0.3))
    assert text.endswith("(Stopped early: this run used its budget of 0.5 seconds.)")
    assert calls == 3  # 0.3 s, 0.6 s: past the budget, the third call is the wind-down
    assert [name for name, _ in _budget_events(rows)] == ["max_wall_seconds"]


async def test_a_model_that_still_calls_tools_when_winding_down_gets_the_notice_alone(tmp_path: Path) -> None:
    def stubborn(body: dict[str, Any]) -> Reply:
        return Reply(tool_calls=[TOOL])

    text, calls, rows = await _run(tmp_path, {"max_tool_rounds": 1}, stubborn)
    assert text == "(Stopped early: this run used its budget of 1 tool rounds.)"
    assert calls == 2 and sum(r["kind"] == "tool_call" for r in rows) == 1  # its last calls never ran
