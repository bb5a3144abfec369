"""Every registry tool, for a persona with its label, without it, and with a wrong scope:
what ``tools/list`` shows over the bridge socket and what the bridge lets run agree, and
every decision is in the audit log."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.labels import KNOWN_LABELS, example_label
from tests.integration.host_tools.conftest import BridgeEnv, make_bridge_env
from tools import registry
from tools.base import HostTool

# Valid arguments for each tool: the call must get past schema validation to the decision.
SAMPLE_ARGS: dict[str, dict[str, Any]] = {
    "channel_send": {"channelId": "console", "content": "hello"},
    "memory_access": {"operation": "list"},
    "memory_search": {"query": "hello"},
    "memory_update": {"target": "fact", "action": "set", "content": "hello", "category": "learning"},
    "db_query": {"sql": "SELECT key FROM memory_items"},
    "net_http": {"method": "GET", "url": "http://127.0.0.1:9/"},
    "web_request": {"method": "GET", "url": "http://127.0.0.1:9/"},
    "web_scrape": {"url": "http://127.0.0.1:9/"},
    "schedule_manage": {"action": "list"},
    "persona_send": {"target_persona": "assistant", "message": "hello"},
    "persona_task_status": {"task_id": "no-such-task"},
    "persona_list": {},
    "background_agent": {"action": "profiles"},
    "subagent_invoke": {"name": "no-such-subagent"},
    "read_file": {"file_path": "/workspace/no-such-file.txt"},
    "write_file": {"file_path": "/workspace/matrix.txt", "content": "hello"},
    "list_directory": {"path": "/workspace"},
    "glob": {"pattern": "*.txt"},
    "grep": {"pattern": "hello"},
    "json_query": {"path": "/workspace/no-such.json", "query": ".name"},
    "edit_file": {"file_path": "/workspace/no-such-file.txt", "old_string": "a", "new_string": "b"},
    "patch_apply": {"changes": [{"path": "/workspace/matrix.txt", "content": "x"}], "dry_run": True},
    "extract_document": {"file_path": "/workspace/no-such.pdf"},
    "view_image": {"file_path": "/workspace/no-such.png"},
    "git_read": {"subcommand": "status"},
    "bash": {"command": "true", "timeout_ms": 10000},
    "wait_for": {"type": "file", "path": "/workspace/no-such-file.txt", "timeout_ms": 200},
    "state_get": {"namespace": "matrix", "key": "k"},
    "state_query": {"namespace": "matrix"},
    "state_put": {"namespace": "matrix", "key": "k", "value": {"n": 1}},
    "state_cas": {"namespace": "matrix", "key": "k", "expected_version": 0, "value": 1},
    "state_delete": {"namespace": "matrix", "key": "k"},
    "agent": {"prompt": "hello", "model": "nosuch:model"},
    "compose": {"nodes": [{"id": "a", "prompt": "hello", "model": "nosuch:model"}]},
    "cancel_background_job": {"jobId": "no-such-job", "reason": "matrix"},
    "get_background_job_health": {"jobId": "no-such-job"},
    "send_message_to_agent": {"jobId": "no-such-job", "message": "hello"},
    "emit_progress": {"message": "hello"},
    "create_schedule": {"name": "Matrix", "command": "say hi", "cron": "0 9 * * *"},
    "update_schedule": {"taskId": "no-such-task", "enabled": False},
    "list_schedules": {},
    "get_schedule_history": {"taskId": "no-such-task"},
    "cancel_schedule": {"taskId": "no-such-task"},
    "skill": {"name": "no-such-skill"},
    "procedure_write": {"name": "matrix", "content": "# Matrix\n1. step"},
    "model_complete": {"prompt": "hello", "model": "nosuch:model"},
    "workspace_publish": {"type": "status", "content": "hello"},
    "workspace_query": {"query": "hello"},
    "workspace_subscribe": {},
    "get_runtime_state": {"view": "self"},
    "get_facet": {"session": "current"},
    "read_witness": {"session": "current"},
    "search_witness": {"query": "hello"},
    "config_get": {"target": "env"},
    "browser_open": {"url": "http://127.0.0.1:9/"},
    "browser_observe": {},
    "browser_act": {"action": "click", "target": {"kind": "semantic", "text": "OK"}},
    "browser_screenshot": {},
    "browser_close": {},
    "image_generate": {"prompt": "a lighthouse"},
    "image_edit": {"prompt": "make it blue", "image_paths": ["/workspace/no-such.png"]},
    "ask_question": {"question": "Which one?", "type": "choice", "choices": ["a", "b"]},
    "exit_plan_mode": {"plan": "1. read\n2. write"},
}
TOOLS = registry.all_tools()


def _label(prefix: str) -> str:
    return example_label(prefix)


def _wrong_scope(tool: HostTool) -> str | None:
    """A valid label of the tool's prefix whose scope does not cover the sample call."""
    named = KNOWN_LABELS[tool.prefix] == "<name>" and tool.scope_arg is not None
    return f"{tool.prefix}:somewhere-else" if named else None


def _sharing(tool: HostTool) -> set[str]:
    """The tools one label of ``tool``'s prefix lists to a turn (persona.send covers three; a
    tool for child agents only is not among them)."""
    return {t.mcp_name for t in TOOLS if t.prefix == tool.prefix and t.offered_in(child=False)}


def _personas() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {"assistant": {}, "nothing": {"capabilities": []}}
    for tool in TOOLS:
        out[f"with-{tool.mcp_name}"] = {"capabilities": [_label(tool.prefix)]}
        wrong = _wrong_scope(tool)
        if wrong:
            out[f"wrong-{tool.mcp_name}"] = {"capabilities": [wrong]}
    return out


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[BridgeEnv]:
    # net_http's allowlist keeps its sample call from leaving the host even when allowed; the
    # images endpoint is the offline provider, so image tools are offered and fail to connect.
    env = await make_bridge_env(
        tmp_path,
        _personas(),
        extra={"net_http": {"allowed_domains": ["example.invalid"]}, "images": {"provider": "fake"}},
    )
    yield env
    await env.close()


def test_every_registry_tool_has_sample_arguments() -> None:
    missing = [t.mcp_name for t in TOOLS if t.mcp_name not in SAMPLE_ARGS]
    assert not missing, f"add sample arguments for {missing} to SAMPLE_ARGS"


async def _listed(env: BridgeEnv, persona: str) -> tuple[set[str], list[dict[str, Any]], Any]:
    identity = env.register(persona)
    async with env.client(identity) as client:
        tools = await client.list_tools()
    return {t["name"] for t in tools}, tools, identity


@pytest.mark.parametrize("tool", [t for t in TOOLS if t.offered_in(child=False)], ids=lambda t: t.mcp_name)
async def test_with_the_label_the_tool_is_listed_with_its_schema_and_allowed(
    env: BridgeEnv, tool: Any
) -> None:
    names, tools, identity = await _listed(env, f"with-{tool.mcp_name}")
    assert names == _sharing(tool)
    (shown,) = [t for t in tools if t["name"] == tool.mcp_name]
    assert shown["inputSchema"] == tool.input_schema and shown["description"] == tool.description
    async with env.client(identity) as client:
        await client.call(tool.mcp_name, SAMPLE_ARGS[tool.mcp_name])
    rows = await env.audit(identity.run_id)
    assert [r["decision"] for r in rows] == ["allowed", "result"]
    assert rows[0]["tool"] == tool.mcp_name and rows[0]["persona"] == f"with-{tool.mcp_name}"
    assert rows[0]["detail"].startswith("allowed by ")
    assert rows[1]["status"] in ("ok", "error")


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.mcp_name)
async def test_without_the_label_the_tool_is_hidden_and_refused(env: BridgeEnv, tool: Any) -> None:
    names, _, identity = await _listed(env, "nothing")
    assert names == set()
    async with env.client(identity) as client:
        reply = await client.call(tool.mcp_name, SAMPLE_ARGS[tool.mcp_name])
    assert reply["is_error"] and reply["unknown_tool"]
    assert f"{tool.mcp_name} needs the capability '{tool.prefix}" in reply["content"]
    rows = await env.audit(identity.run_id)
    assert [(r["tool"], r["decision"]) for r in rows] == [(tool.mcp_name, "refused")]
    assert "does not hold" in rows[0]["detail"]


@pytest.mark.parametrize("tool", [t for t in TOOLS if _wrong_scope(t)], ids=lambda t: t.mcp_name)
async def test_with_a_wrong_scope_the_tool_is_listed_but_the_call_refused(env: BridgeEnv, tool: Any) -> None:
    names, _, identity = await _listed(env, f"wrong-{tool.mcp_name}")
    assert names == _sharing(tool)
    async with env.client(identity) as client:
        reply = await client.call(tool.mcp_name, SAMPLE_ARGS[tool.mcp_name])
    assert reply["is_error"] and not reply["unknown_tool"]
    assert "not permitted" in reply["content"] and "somewhere-else" in reply["content"]
    rows = await env.audit(identity.run_id)
    assert [(r["decision"], r["status"]) for r in rows] == [("refused", None)]


async def test_a_persona_with_every_label_lists_every_tool_in_registry_order(tmp_path: Path) -> None:
    labels = sorted({_label(t.prefix) for t in TOOLS})
    env = await make_bridge_env(
        tmp_path, {"assistant": {"capabilities": labels}}, extra={"images": {"provider": "fake"}}
    )
    try:
        _, tools, _ = await _listed(env, "assistant")
    finally:
        await env.close()
    assert [t["name"] for t in tools] == [t.mcp_name for t in TOOLS if t.offered_in(child=False)]
