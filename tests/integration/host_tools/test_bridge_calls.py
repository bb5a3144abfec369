"""What a call's outcome looks like to the model, and what the audit log keeps of it."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.host_tools.conftest import BridgeEnv, add_thread, make_bridge_env
from tools.base import HostTool, ToolContext, ToolError
from tools.host import memory_access, schedule_manage

SECRET = "sk-live-0123456789abcdefghijklmnopqrstuv"


async def _fails(ctx: ToolContext, args: dict[str, Any]) -> Any:
    raise ToolError(f"the widget {args['name']} is broken; try another widget")


async def _crashes(ctx: ToolContext, args: dict[str, Any]) -> Any:
    raise RuntimeError(f"database password={SECRET} leaked into an exception")


async def _hangs(ctx: ToolContext, args: dict[str, Any]) -> Any:
    await asyncio.sleep(30)


async def _echo(ctx: ToolContext, args: dict[str, Any]) -> Any:
    return {"thread": ctx.thread_id, "persona": ctx.persona.name, "run": ctx.run_id, "args": args}


def _tool(name: str, handler: Any, timeout: float = 5.0) -> HostTool:
    return HostTool(
        mcp_name=name,
        internal_name=name.replace("_", "."),
        prefix="subagent.invoke",
        description=name,
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}, "token": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": False,
        },
        handler=handler,
        timeout=timeout,
    )


TOOLS = [
    memory_access.TOOL,
    schedule_manage.TOOL,
    _tool("widget_fails", _fails),
    _tool("widget_crashes", _crashes),
    _tool("widget_hangs", _hangs, timeout=0.1),
    _tool("widget_echo", _echo),
]


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[BridgeEnv]:
    labels = ["memory.access:thread", "schedule.manage:own", "subagent.invoke"]
    env = await make_bridge_env(tmp_path, {"assistant": {"capabilities": labels}}, tools=TOOLS)
    yield env
    await env.close()


async def test_a_result_reaches_the_model_as_json_text(env: BridgeEnv) -> None:
    identity = env.register("assistant")
    result = await env.bridge.call(identity, "widget_echo", {"name": "w1"})
    assert not result.is_error
    assert json.loads(result.content) == {
        "thread": env.thread_id,
        "persona": "assistant",
        "run": identity.run_id,
        "args": {"name": "w1"},
    }
    rows = await env.audit(identity.run_id)
    assert [(r["decision"], r["status"]) for r in rows] == [("allowed", None), ("result", "ok")]


async def test_a_tool_error_is_shown_verbatim(env: BridgeEnv) -> None:
    identity = env.register("assistant")
    result = await env.bridge.call(identity, "widget_fails", {"name": "w1"})
    assert (result.is_error, result.content) == (True, "the widget w1 is broken; try another widget")
    rows = await env.audit(identity.run_id)
    assert (rows[-1]["decision"], rows[-1]["status"]) == ("result", "error")


async def test_a_crash_is_masked_for_the_model_and_logged(
    env: BridgeEnv, caplog: pytest.LogCaptureFixture
) -> None:
    identity = env.register("assistant")
    with caplog.at_level(logging.ERROR, logger="talon.bridge"):
        result = await env.bridge.call(identity, "widget_crashes", {"name": "w1"})
    assert (result.is_error, result.content) == (True, "internal error in widget_crashes")
    assert any(r.exc_info and "leaked into an exception" in str(r.exc_info[1]) for r in caplog.records)
    rows = await env.audit(identity.run_id)
    assert rows[-1]["status"] == "error" and rows[-1]["detail"] == "internal error: RuntimeError"


async def test_a_slow_tool_times_out_with_its_own_limit(env: BridgeEnv) -> None:
    identity = env.register("assistant")
    started = asyncio.get_running_loop().time()
    result = await env.bridge.call(identity, "widget_hangs", {"name": "w1"})
    assert asyncio.get_running_loop().time() - started < 2
    assert result.is_error and result.content.startswith("widget_hangs timed out after 0.1s")
    rows = await env.audit(identity.run_id)
    assert (rows[-1]["decision"], rows[-1]["status"]) == ("result", "timeout")


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("schedule_manage", {}, "action is required"),
        (
            "schedule_manage",
            {"action": "explode"},
            "action must be one of create, update, cancel, delete, list",
        ),
        ("schedule_manage", {"action": "list", "enabled": "yes"}, "enabled must be true or false"),
        ("memory_access", {"operation": "list", "colour": "red"}, "unknown argument 'colour'; allowed: key,"),
        ("widget_echo", {"name": 5, "token": SECRET}, "name must be a string"),
    ],
)
async def test_invalid_arguments_are_refused_with_an_actionable_message(
    env: BridgeEnv, tool: str, args: dict[str, Any], message: str
) -> None:
    identity = env.register("assistant")
    result = await env.bridge.call(identity, tool, args)
    assert result.is_error and result.refused
    assert result.content.startswith(f"invalid arguments for {tool}: ") and message in result.content
    assert SECRET not in result.content
    rows = await env.audit(identity.run_id)
    assert [r["decision"] for r in rows] == ["refused"] and message in rows[0]["detail"]


async def test_the_audit_log_never_holds_argument_values(env: BridgeEnv) -> None:
    identity = env.register("assistant")
    await env.bridge.call(identity, "memory_access", {"operation": "write", "key": "api", "value": SECRET})
    await env.bridge.call(identity, "widget_echo", {"name": "x", "token": SECRET})
    await env.bridge.call(identity, "widget_crashes", {"name": "x"})
    rows = await env.audit(identity.run_id)
    assert len(rows) == 6
    assert all(SECRET not in (r["detail"] or "") for r in rows)
    assert "args: key, operation, value" in rows[0]["detail"]


async def test_calls_run_as_the_identity_they_were_registered_for(env: BridgeEnv) -> None:
    first = env.register("assistant")
    second = env.register("assistant", thread_id=await add_thread(env.db, chat="second"))
    await env.bridge.call(first, "memory_access", {"operation": "write", "key": "k", "value": "first"})
    await env.bridge.call(second, "memory_access", {"operation": "write", "key": "k", "value": "second"})
    read = await env.bridge.call(first, "memory_access", {"operation": "read", "key": "k"})
    assert json.loads(read.content)["value"] == "first"
