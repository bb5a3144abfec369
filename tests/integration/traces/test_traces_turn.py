"""Run traces in real turns: a turn with tool calls leaves its model and tool calls in
run_events with tokens, timings and decisions and without content by default; with
``traces.content: true`` the prompt, arguments and results are there too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.fakes.model_script import Error
from tests.harness import provider_for, running_gateway, say, tool_results, write_config
from tests.store_helpers import fetch_rows

PROMPT = "please note the PROMPT-MARKER-5521 for later"
ARGUMENT = "ARG-MARKER-7431"
PERSONAS = {"assistant": {"capabilities": ["state.write:team"]}}


def _responder(body: dict[str, Any]) -> Reply:
    done = len(tool_results(body))
    if done == 0:
        return Reply(
            tool_calls=[
                Call(
                    "state_put", {"namespace": "n", "key": "k", "scope": "team", "value": {"note": ARGUMENT}}
                ),
                Call("state_get", {"namespace": "n", "key": "k", "scope": "team"}),  # not its label
            ],
            input_tokens=120,
            output_tokens=30,
        )
    return Reply(text="noted RESULT-TEXT-991", input_tokens=200, output_tokens=12)


async def _turn(tmp_path: Path, extra: dict[str, Any] | None = None) -> tuple[str, list[Any]]:
    async with FakeAnthropic(responder=_responder) as fake:
        config = write_config(tmp_path, provider=provider_for(fake), personas=PERSONAS, extra=extra)
        async with running_gateway(config) as gw:
            turn = await say(gw, PROMPT)
            rows = await fetch_rows(
                gw.components.db,
                "SELECT e.*, r.persona AS run_persona FROM run_events e JOIN runs r ON r.id = e.run_id "
                "ORDER BY e.run_id, e.seq",
            )
    return turn.text, rows


async def test_a_turn_records_its_model_and_tool_calls_without_content(tmp_path: Path) -> None:
    text, rows = await _turn(tmp_path)
    assert text == "noted RESULT-TEXT-991"
    kinds = [(r["kind"], r["name"]) for r in rows]
    assert kinds == [
        ("phase", "turn_started"),
        ("model_call", "test-model"),
        ("tool_call", "state_put"),
        ("tool_call", "state_get"),
        ("model_call", "test-model"),
        ("phase", "turn_ended"),
    ]
    first, put, get, second = (json.loads(r["payload"]) for r in rows[1:5])
    assert (first["input_tokens"], first["output_tokens"], first["tool_calls"]) == (120, 30, 2)
    assert (second["input_tokens"], second["output_tokens"], second["stop_reason"]) == (200, 12, "end_turn")
    assert all(r["duration_ms"] is not None and r["duration_ms"] >= 0 for r in rows[1:5])
    assert put["decision"] == "allowed" and put["result_bytes"] > 0 and rows[2]["error_class"] is None
    assert get["decision"] == "refused" and rows[3]["error_class"] == "not_permitted"
    assert json.loads(rows[-1]["payload"])["outcome"] == "completed"
    assert {r["run_persona"] for r in rows} == {"assistant"} and len({r["run_id"] for r in rows}) == 1
    stored = json.dumps([dict(r) for r in rows])
    for content in ("PROMPT-MARKER-5521", ARGUMENT, "RESULT-TEXT-991", "You are assistant"):
        assert content not in stored


async def test_with_traces_content_the_prompt_arguments_and_results_are_kept(tmp_path: Path) -> None:
    _, rows = await _turn(tmp_path, extra={"traces": {"content": True}})
    first, put, _get, second = (json.loads(r["payload"]) for r in rows[1:5])
    assert "You are assistant" in first["system"]
    assert any("PROMPT-MARKER-5521" in m["content"] for m in first["prompt"])
    assert ARGUMENT in put["arguments"] and '"version": 1' in put["result"]
    assert second["text"] == "noted RESULT-TEXT-991"


async def test_a_failed_turn_records_the_failed_model_call_and_its_outcome(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        fake.script(*[Error(400, "bad request") for _ in range(3)])
        config = write_config(tmp_path, provider=provider_for(fake), personas=PERSONAS)
        async with running_gateway(config) as gw:
            turn = await say(gw, PROMPT)
            rows = await fetch_rows(gw.components.db, "SELECT * FROM run_events ORDER BY run_id, seq")
    assert turn.status == "failed"
    first_run = [r for r in rows if r["run_id"] == rows[0]["run_id"]]
    assert [(r["kind"], r["name"], r["error_class"]) for r in first_run] == [
        ("phase", "turn_started", None),
        ("model_call", "test-model", "ProviderError"),
        ("phase", "turn_ended", "failed"),
    ]
    assert json.loads(first_run[-1]["payload"])["outcome"] == "failed"
