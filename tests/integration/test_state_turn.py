"""The state tools in real turns: the fake model writes a document, loses a compare-and-swap to
a stale version and wins at the current one; a restarted gateway on the same data dir reads
it back; a persona that may only read is offered only the reading tools and told how."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, say, tool_results, write_config

LABELS = ["state.read:team", "state.write:team"]
DOC = {"namespace": "release", "key": "checklist", "scope": "team"}


def _first_turn(body: dict[str, Any]) -> Reply:
    results = [json.loads(text) for _, text in tool_results(body)]
    steps = [
        Call("state_put", {**DOC, "value": {"done": ["tests"]}, "metadata": {"by": "first turn"}}),
        Call("state_cas", {**DOC, "expected_version": 0, "value": {"done": []}}),
        Call("state_cas", {**DOC, "expected_version": 1, "value": {"done": ["tests", "docs"]}}),
        Call("state_get", DOC),
    ]
    if len(results) < len(steps):
        return Reply(tool_calls=[steps[len(results)]])
    put, stale, won, got = results
    return Reply(
        text=f"put v{put['version']}; stale matched={stale['matched']} at v{stale['version']} "
        f"seeing {stale['value']['done']}; cas v{won['version']}; now {got['value']['done']} v{got['version']}"
    )


def _after_restart(body: dict[str, Any]) -> Reply:
    results = tool_results(body)
    if not results:
        return Reply(tool_calls=[Call("state_get", DOC)])
    document = json.loads(results[0][1])
    return Reply(
        text=f"after restart: {document['value']['done']} v{document['version']} by {document['written_by']}"
    )


async def test_a_turn_coordinates_through_cas_and_the_document_survives_a_restart(tmp_path: Path) -> None:
    responders = [_first_turn, _after_restart]
    async with FakeAnthropic(responder=lambda body: responders[0](body)) as fake:
        config = write_config(
            tmp_path, provider=provider_for(fake), personas={"assistant": {"capabilities": LABELS}}
        )
        async with running_gateway(config) as gw:
            first = await say(gw, "tick off the docs")
        responders.pop(0)
        async with running_gateway(config) as gw:
            second = await say(gw, "what is done?", thread="other")
        tools = {t["name"] for t in fake.requests[0]["tools"]}
        system = json.dumps(fake.requests[0]["system"])
    assert {"state_get", "state_query", "state_put", "state_cas", "state_delete"} <= tools
    assert "## Writing state (state_put, state_cas, state_delete)" in system
    assert first.text == (
        "put v1; stale matched=False at v1 seeing ['tests']; cas v2; now ['tests', 'docs'] v2"
    )
    assert second.text == "after restart: ['tests', 'docs'] v2 by assistant"


async def test_a_reader_is_offered_only_the_reading_tools_and_cannot_write(tmp_path: Path) -> None:
    def respond(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if not results:
            return Reply(tool_calls=[Call("state_put", {"namespace": "n", "key": "k", "value": 1})])
        if len(results) == 1:
            return Reply(tool_calls=[Call("state_get", {"namespace": "n", "key": "k", "scope": "team"})])
        return Reply(text=" | ".join(f"{error}: {text}" for error, text in results))

    async with FakeAnthropic(responder=respond) as fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            personas={"assistant": {"capabilities": ["state.read:persona"]}},
        )
        async with running_gateway(config) as gw:
            turn = await say(gw, "write something")
        tools = {t["name"] for t in fake.requests[0]["tools"]}
        system = json.dumps(fake.requests[0]["system"])
    assert {"state_get", "state_query"} <= tools and not tools & {"state_put", "state_cas", "state_delete"}
    assert "## State (state_get, state_query)" in system and "Writing state" not in system
    refused, team = turn.text.split(" | ")
    assert refused.startswith("True: ") and "state.write" in refused
    assert team.startswith("True: scope 'team' needs the label 'state.read:team'")
