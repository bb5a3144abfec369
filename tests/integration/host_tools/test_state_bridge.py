"""The state tools through the real bridge: the labels decide which tools a persona is offered
and which scope it may use, a direct call without the label is refused before the handler
runs, a hostile value over the socket is refused, and every decision is audited."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.host_tools.conftest import BridgeEnv, make_bridge_env

DEEP = "[" * 200 + "]" * 200


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[BridgeEnv]:
    environment = await make_bridge_env(
        tmp_path,
        {
            "assistant": {"capabilities": ["state.read:team", "state.write:team"]},
            "worker": {"capabilities": ["state.read:team", "state.write:persona"]},
            "reader": {"capabilities": ["state.read:persona"]},
            "plain": {"capabilities": ["memory.access:thread"]},
        },
    )
    yield environment
    await environment.close()


def _names(env: BridgeEnv, persona: str) -> set[str]:
    return {
        t.mcp_name for t in env.bridge.tools_for(env.register(persona)) if t.mcp_name.startswith("state_")
    }


async def test_the_labels_decide_which_state_tools_are_offered(env: BridgeEnv) -> None:
    every = {"state_get", "state_query", "state_put", "state_cas", "state_delete"}
    assert _names(env, "assistant") == every
    assert _names(env, "worker") == every
    assert _names(env, "reader") == {"state_get", "state_query"}
    assert _names(env, "plain") == set()


async def test_a_call_without_the_label_is_refused_before_it_runs(env: BridgeEnv) -> None:
    reader = env.register("reader")
    refused = await env.bridge.call(reader, "state_put", {"namespace": "n", "key": "k", "value": 1})
    assert refused.refused and refused.is_error
    assert "state_put needs the capability 'state.write:persona|team'" in refused.content
    plain = env.register("plain")
    assert (await env.bridge.call(plain, "state_get", {"namespace": "n", "key": "k"})).refused
    lead = env.register("assistant")
    assert (await env.bridge.call(lead, "state_get", {"namespace": "n", "key": "k"})).content == "null"
    decisions = [(r["persona"], r["tool"], r["decision"]) for r in await env.audit()]
    assert ("reader", "state_put", "refused") in decisions
    assert ("plain", "state_get", "refused") in decisions
    assert ("assistant", "state_get", "allowed") in decisions


async def test_the_team_scope_needs_the_team_label(env: BridgeEnv) -> None:
    lead, worker = env.register("assistant"), env.register("worker")
    shared = {"namespace": "board", "key": "status", "scope": "team"}
    assert not (await env.bridge.call(lead, "state_put", {**shared, "value": "green"})).is_error
    seen = await env.bridge.call(worker, "state_get", shared)
    assert json.loads(seen.content)["value"] == "green"
    write = await env.bridge.call(worker, "state_cas", {**shared, "value": "red", "expected_version": 1})
    assert write.is_error and not write.refused
    assert "scope 'team' needs the label 'state.write:team'" in write.content
    own = await env.bridge.call(worker, "state_put", {"namespace": "board", "key": "status", "value": "mine"})
    assert json.loads(own.content) == {
        "namespace": "board",
        "key": "status",
        "scope": "persona",
        "version": 1,
    }
    assert json.loads((await env.bridge.call(lead, "state_get", shared)).content)["value"] == "green"
    results = [(r["persona"], r["tool"], r["status"]) for r in await env.audit() if r["decision"] == "result"]
    assert ("worker", "state_cas", "error") in results


async def test_bad_arguments_are_refused_with_what_to_send(env: BridgeEnv) -> None:
    lead = env.register("assistant")
    missing = await env.bridge.call(lead, "state_cas", {"namespace": "n", "key": "k", "value": 1})
    assert missing.refused and "expected_version" in missing.content
    wrong = await env.bridge.call(lead, "state_get", {"namespace": "n", "key": "k", "scope": "everyone"})
    assert wrong.refused and "persona" in wrong.content and "team" in wrong.content


async def test_hostile_values_are_refused_and_nothing_is_stored(env: BridgeEnv) -> None:
    assistant = env.register("assistant")
    deep = await env.bridge.call(
        assistant, "state_put", {"namespace": "n", "key": "k", "value": json.loads(DEEP)}
    )
    assert deep.is_error and "nested deeper than 64 levels" in deep.content
    async with env.client(assistant) as client:
        huge = await client.call("state_put", {"namespace": "n", "key": "k", "value": {"text": "x" * 70_000}})
        after = await client.call("state_get", {"namespace": "n", "key": "k"})
    assert huge["is_error"] and "the limit is 65,536" in huge["content"]
    assert after["content"] == "null"
