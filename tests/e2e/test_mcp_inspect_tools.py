"""The self-inspection tools through ``talon mcp host-tools`` with the real ``mcp`` client: a
persona with runtime.inspect lists and calls them against a running daemon (config_get masks
the provider key the daemon was started with); one without the label does not see them and
a call is refused as an unknown tool."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.e2e.daemon import TALON, Daemon, talon_env
from tests.harness import write_config

REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-e2e-provider-secret-4471"
INSPECT = ["get_runtime_state", "get_facet", "read_witness", "search_witness", "config_get"]


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[Path]:
    provider = {
        "type": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key": "${TALON_E2E_KEY}",
        "max_retries": 0,
    }
    config = write_config(
        tmp_path,
        provider=provider,
        model="fake:m",
        personas={"assistant": {"capabilities": ["runtime.inspect"]}, "plain": {"capabilities": []}},
    )
    (tmp_path / ".env").write_text(f"TALON_E2E_KEY={SECRET}\n")
    async with Daemon(config) as running:
        await running.start(tmp_path / "data")
        yield config
        assert await running.stop() == 0
    assert "Traceback" not in running.log(), running.log()


def _client(config: Path, persona: str) -> Client:
    command = [*TALON, "mcp", "host-tools", "-c", str(config), "--persona", persona, "--thread", "inspect"]
    params = StdioServerParameters(command=command[0], args=command[1:], env=talon_env(), cwd=str(REPO))
    return Client(params, read_timeout_seconds=30)


async def test_the_inspection_tools_over_mcp_and_their_refusal(daemon: Path) -> None:
    async with asyncio.timeout(60), _client(daemon, "assistant") as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        state = json.loads((await client.call_tool("get_runtime_state", {"view": "self"})).content[0].text)
        config = await client.call_tool("config_get", {"target": "config", "key": "providers.fake"})
        env = json.loads((await client.call_tool("config_get", {"target": "env"})).content[0].text)
        witness = json.loads((await client.call_tool("read_witness", {"session": "current"})).content[0].text)
        facet = await client.call_tool("get_facet", {})
        bad = await client.call_tool("read_witness", {"limit": 500})
    assert listed == INSPECT
    assert state["self"]["persona"] == "assistant" and state["self"]["labels"] == ["runtime.inspect"]
    assert state["self"]["budget"] is None  # an ad-hoc session has no run budget
    provider = json.loads(config.content[0].text)["value"]
    assert provider["api_key"] == "[masked]" and SECRET not in config.content[0].text
    assert env["variables"] == [{"name": "TALON_E2E_KEY", "set": True, "from": ".env"}]
    assert witness["is_current_run"] is True and witness["events"] == []
    assert facet.is_error and "no earlier traced run" in facet.content[0].text
    assert bad.is_error and "limit" in bad.content[0].text

    async with asyncio.timeout(60), _client(daemon, "plain") as client:
        plain = [t.name for t in (await client.list_tools()).tools]
        with pytest.raises(MCPError, match="Unknown tool: config_get"):
            await client.call_tool("config_get", {"target": "config"})
    assert not set(plain) & set(INSPECT)
