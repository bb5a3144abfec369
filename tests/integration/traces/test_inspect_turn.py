"""The self-inspection tools in real turns: a second turn reads the first one's facet and
witness, searches its traces, inspects its own state and the config; secrets never show; a
persona without runtime.inspect is not offered the tools and the bridge refuses them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, say, tool_results, write_config
from tests.integration.host_tools.conftest import make_bridge_env

SECRET = "sk-very-secret-value-8842"
LABELS = ["runtime.inspect", "state.read:team"]
LOOKUP = Call("state_get", {"namespace": "n", "key": "k", "scope": "team"})
REFUSED = Call("state_put", {"namespace": "n", "key": "k", "scope": "team", "value": 1})
INSPECT = [
    Call("get_facet", {"session": "latest"}),
    Call(
        "read_witness",
        {"session": "latest", "kinds": ["tool_call"], "where": {"payload.decision": "refused"}},
    ),
    Call("search_witness", {"query": "STATE_GET"}),
    Call("get_runtime_state", {}),
    Call("config_get", {"target": "config"}),
    Call("config_get", {"target": "env"}),
    Call("get_facet", {"session": "current", "fields": ["tool_calls"]}),
    Call("read_witness", {"session": "999999"}),
    Call("read_witness", {"where": {"payload.__proto__.x": 1}}),
]


def _responder(body: dict[str, Any]) -> Reply:
    results = tool_results(body)
    if "second" not in json.dumps(body["messages"]):
        return (
            Reply(tool_calls=[LOOKUP, REFUSED], input_tokens=70, output_tokens=7)
            if not results
            else Reply(text="done", input_tokens=80, output_tokens=3)
        )
    return Reply(tool_calls=INSPECT) if not results else Reply(text="inspected")


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TALON_TEST_PROVIDER_KEY", SECRET)


async def test_a_turn_inspects_the_previous_run_itself_and_the_config(
    tmp_path: Path, secret_env: None
) -> None:
    async with FakeAnthropic(responder=_responder) as fake:
        provider = {**provider_for(fake), "api_key": "${TALON_TEST_PROVIDER_KEY}"}
        config = write_config(tmp_path, provider=provider, personas={"assistant": {"capabilities": LABELS}})
        async with running_gateway(config) as gw:
            assert (await say(gw, "first")).text == "done"
            assert (await say(gw, "second")).text == "inspected"
        last = fake.requests[-1]
    results = tool_results(last)
    assert [failed for failed, _ in results] == [False] * 7 + [True, True]
    facet, witness, search, state, config, env, current = (json.loads(text) for _, text in results[:7])
    assert facet["outcome"] == "completed" and facet["is_current_run"] is False
    assert facet["tokens"] == {"input": 150, "output": 10, "total": 160} and facet["cost"] is None
    assert facet["tool_calls"] == {"total": 2, "by_name": {"state_get": 1, "state_put": 1}, "refused": 1}
    assert facet["errors"]["by_class"] == {"not_permitted": 1}
    assert [(e["name"], e["error_class"]) for e in witness["events"]] == [("state_put", "not_permitted")]
    assert search["sessionsSearched"] == 1 and search["matchLimitReached"] is False
    assert [m["name"] for run in search["runs"] for m in run["matches"]] == ["state_get"]
    assert state["self"]["persona"] == "assistant" and state["self"]["labels"] == LABELS
    assert state["self"]["budget"]["used"]["tool_rounds"] == 0
    offered = {t["name"] for t in state["tools"]["host_tools"]}
    assert {"get_facet", "config_get", "state_get"} <= offered and "state_put" not in offered
    assert [r["path"] for r in state["workspace"]["roots"]] == ["/workspace", "/shared"]
    assert config["value"]["providers"]["fake"]["api_key"] == "[masked]"
    assert config["value"]["agent"]["max_turns"] == 12
    assert env["variables"] == [{"name": "TALON_TEST_PROVIDER_KEY", "set": True, "from": "environment"}]
    assert current["is_current_run"] is True and current["tool_calls"]["total"] == 6  # the calls before it
    assert "no run 999999 among this persona's runs" in results[7][1]
    assert "'__proto__' is not allowed" in results[8][1]
    assert SECRET not in json.dumps(last)


async def test_without_the_label_the_tools_are_not_offered_and_the_bridge_refuses(tmp_path: Path) -> None:
    env = await make_bridge_env(
        tmp_path, {"assistant": {"capabilities": ["state.read:team"]}, "inspector": {"capabilities": LABELS}}
    )
    try:
        plain, inspector = env.register("assistant"), env.register("inspector")
        names = {t.mcp_name for t in env.bridge.tools_for(plain)}
        assert not names & {"get_runtime_state", "get_facet", "read_witness", "search_witness", "config_get"}
        refused = await env.bridge.call(plain, "config_get", {"target": "config"})
        assert refused.is_error and refused.refused and "runtime.inspect" in refused.content
        allowed = await env.bridge.call(
            inspector, "config_get", {"target": "config", "key": "agent.max_turns"}
        )
        assert not allowed.is_error and json.loads(allowed.content)["value"] == 12
    finally:
        await env.close()
