"""``__talond_host_tools`` seen by the ``mcp`` client: in process, and as the
``talon mcp host-tools`` process with a run identity in its environment."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.e2e.daemon import talon_env
from tests.integration.host_tools.conftest import BridgeEnv, make_bridge_env
from tests.store_helpers import fetch_row
from tools import registry
from tools.mcp_server import build_server, main

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[BridgeEnv]:
    env = await make_bridge_env(
        tmp_path, {"assistant": {"capabilities": ["memory.access:thread", "schedule.manage:own"]}}
    )
    yield env
    await env.close()


async def test_list_and_call_in_process(env: BridgeEnv) -> None:
    identity = env.register("assistant")
    async with env.client(identity) as bridge, Client(build_server(bridge)) as client:
        listed = await client.list_tools()
        wrote = await client.call_tool(
            "memory_access", {"operation": "write", "key": "city", "value": "Oslo"}
        )
        read = await client.call_tool("memory_access", {"operation": "read", "key": "city"})
        invalid = await client.call_tool("schedule_manage", {"action": "explode"})
        with pytest.raises(MCPError, match="Unknown tool: db_query"):
            await client.call_tool("db_query", {"sql": "SELECT 1"})
    expected = [t for t in registry.all_tools() if t.prefix in ("memory.access", "schedule.manage")]
    assert [(t.name, t.description, t.input_schema) for t in listed.tools] == [
        (t.mcp_name, t.description, t.input_schema) for t in expected if t
    ]
    assert not wrote.is_error and json.loads(wrote.content[0].text)["created"] is True
    assert json.loads(read.content[0].text)["value"] == "Oslo"
    assert invalid.is_error and invalid.content[0].text.startswith(
        "invalid arguments for schedule_manage: action must be one of"
    )


async def test_the_stdio_server_acts_as_the_run_in_its_environment(env: BridgeEnv) -> None:
    identity = env.register("assistant")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway.cli", "mcp", "host-tools"],
        env=talon_env(identity.environment(env.server.path)),
        cwd=str(REPO),
    )
    async with Client(params, read_timeout_seconds=30) as client:
        listed = await client.list_tools()
        await client.call_tool("memory_access", {"operation": "write", "key": "k", "value": {"n": 1}})
        read = await client.call_tool("memory_access", {"operation": "read", "key": "k"})
        env.bridge.unregister(identity.run_id)
        after = await client.call_tool("memory_access", {"operation": "list"})
        # The list is the run's for its whole life; once the run ends, calls say so.
        listed_after = await client.list_tools()
    assert [t.name for t in listed.tools] == [
        t.mcp_name for t in registry.all_tools() if t.prefix in ("memory.access", "schedule.manage")
    ]
    assert listed_after.tools == listed.tools
    assert json.loads(read.content[0].text)["value"] == '{"n": 1}'
    assert after.is_error and "unknown or finished run" in after.content[0].text
    stored = await fetch_row(env.db, "SELECT thread_id, persona FROM memory_items WHERE key = 'k'")
    assert tuple(stored) == (identity.thread_id, "assistant")


async def test_a_client_that_stops_reading_ends_the_server_quietly(env: BridgeEnv) -> None:
    identity = env.register("assistant")
    read_end, write_end = os.pipe()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.cli",
        "mcp",
        "host-tools",
        stdin=asyncio.subprocess.PIPE,
        stdout=write_end,
        stderr=asyncio.subprocess.PIPE,
        env=talon_env(identity.environment(env.server.path)),
        cwd=REPO,
    )
    os.close(write_end)
    os.close(read_end)  # the client is gone: every reply meets a closed pipe
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    requests = b"".join(json.dumps(message).encode() + b"\n" for message in (initialize, listing))
    _, err = await asyncio.wait_for(proc.communicate(requests), 60)
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err


def test_an_incomplete_identity_in_the_environment_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TALON_RUN_ID", "5")
    monkeypatch.setenv("TALON_PERSONA", "assistant")
    assert main(None, persona=None, thread=None) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "incomplete run identity" in captured.err and "TALON_RUN_SECRET" in captured.err
