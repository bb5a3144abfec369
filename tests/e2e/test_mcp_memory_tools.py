"""memory_search and memory_update through ``talon mcp host-tools`` with the real MCP client:
a fact and a memory_access note are found by rank across a kill -9 and a restart of
``talon run``, a session (which answers no sender) has no user scope, a malformed query
comes back as a tool error that says what to send, and a persona without memory.access is not
offered the tools."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.e2e.daemon import TALON, Daemon, talon_env
from tests.harness import write_config

REPO = Path(__file__).resolve().parents[2]
OFFLINE_PROVIDER = {
    "type": "openai",
    "base_url": "http://127.0.0.1:9/v1",
    "api_key": "none",
    "max_retries": 0,
}


def _client(config: Path, persona: str) -> Client:
    command = [*TALON, "mcp", "host-tools", "-c", str(config), "--persona", persona, "--thread", "notes"]
    params = StdioServerParameters(command=command[0], args=command[1:], env=talon_env(), cwd=str(REPO))
    return Client(params, read_timeout_seconds=30)


def _json(result: Any) -> Any:
    return json.loads(result.content[0].text)


async def test_memory_tools_over_mcp_survive_a_kill_and_a_restart(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        provider=OFFLINE_PROVIDER,
        model="fake:m",
        personas={"assistant": {"capabilities": ["memory.access:persona"]}, "plain": {}},
    )
    async with Daemon(config) as daemon:
        await daemon.start(tmp_path / "data")
        async with asyncio.timeout(60), _client(config, "assistant") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            team = await client.call_tool(
                "memory_update",
                {
                    "target": "fact",
                    "action": "set",
                    "scope": "persona",
                    "category": "convention",
                    "content": "Releases go out on Thursdays after the smoke tests",
                    "evidence": "handbook",
                },
            )
            await client.call_tool(
                "memory_access", {"operation": "write", "key": "deploy", "value": "Thursday deploy notes"}
            )
            user = await client.call_tool(
                "memory_update",
                {
                    "target": "fact",
                    "action": "set",
                    "scope": "user",
                    "category": "preference",
                    "content": "x",
                },
            )
            bad = await client.call_tool("memory_search", {"query": "releases AND"})
        await daemon.kill()
        await daemon.start(tmp_path / "data")
        async with asyncio.timeout(60), _client(config, "assistant") as client:
            found = await client.call_tool("memory_search", {"query": "thursday*"})
            conventions = await client.call_tool(
                "memory_search", {"query": "thursday", "category": "convention"}
            )
        async with asyncio.timeout(60), _client(config, "plain") as client:
            plain_names = [t.name for t in (await client.list_tools()).tools]
            with pytest.raises(MCPError, match="memory_search"):
                await client.call_tool("memory_search", {"query": "thursday"})
        assert await daemon.stop() == 0
    assert "Traceback" not in daemon.log(), daemon.log()
    assert {"memory_access", "memory_search", "memory_update"} <= set(names)
    assert not team.is_error and _json(team)["scope"] == "persona"
    assert user.is_error and "needs a turn that answers one person" in user.content[0].text
    assert (
        bad.is_error and "needs a term" in bad.content[0].text and "sqlite" not in bad.content[0].text.lower()
    )
    results = _json(found)["results"]
    assert {(r.get("id"), r.get("key"), r["scope"]) for r in results} == {
        (_json(team)["id"], None, "persona"),
        (None, "deploy", "thread"),
    }
    assert [r["content"] for r in _json(conventions)["results"]] == [
        "Releases go out on Thursdays after the smoke tests"
    ]
    assert plain_names == []
