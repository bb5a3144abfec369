"""The state tools over ``talon mcp host-tools`` with the real ``mcp`` client against ``talon
run`` in a subprocess: documents written by one client survive a kill -9 of the daemon and are
read back by another persona's client after the restart; a persona without the labels is not
offered the tools and a direct call is refused."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

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
BOARD = {"namespace": "board", "key": "status", "scope": "team"}


def _params(config: Path, persona: str) -> StdioServerParameters:
    command = [*TALON, "mcp", "host-tools", "-c", str(config), "--persona", persona, "--thread", "state"]
    return StdioServerParameters(command=command[0], args=command[1:], env=talon_env(), cwd=str(REPO))


def _json(result: object) -> object:
    return json.loads(result.content[0].text)  # type: ignore[attr-defined]


async def test_documents_survive_a_kill_of_the_daemon_and_the_team_shares_them(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        provider=OFFLINE_PROVIDER,
        model="fake:m",
        personas={
            "assistant": {"capabilities": ["state.read:team", "state.write:team"]},
            "helper": {"capabilities": ["state.read:team", "state.write:persona"]},
            "plain": {"capabilities": ["memory.access:thread"]},
        },
    )
    data = tmp_path / "data"
    async with Daemon(config) as daemon:
        await daemon.start(data)
        async with (
            asyncio.timeout(60),
            Client(_params(config, "assistant"), read_timeout_seconds=30) as client,
        ):
            listed = {t.name for t in (await client.list_tools()).tools}
            created = await client.call_tool(
                "state_cas", {**BOARD, "expected_version": 0, "value": {"ok": 1}}
            )
            stale = await client.call_tool("state_cas", {**BOARD, "expected_version": 0, "value": {"ok": 2}})
            moved = await client.call_tool("state_cas", {**BOARD, "expected_version": 1, "value": {"ok": 3}})
            mine = await client.call_tool("state_put", {"namespace": "notes", "key": "a", "value": "own"})
        await daemon.kill()
        await daemon.start(data)
        async with asyncio.timeout(60), Client(_params(config, "helper"), read_timeout_seconds=30) as client:
            shared = await client.call_tool("state_get", BOARD)
            private = await client.call_tool("state_get", {"namespace": "notes", "key": "a"})
            refused = await client.call_tool("state_put", {**BOARD, "value": "mine now"})
        async with asyncio.timeout(60), Client(_params(config, "plain"), read_timeout_seconds=30) as client:
            plain = {t.name for t in (await client.list_tools()).tools}
            with pytest.raises(MCPError, match="state_get"):
                await client.call_tool("state_get", BOARD)
        assert await daemon.stop() == 0
    assert {"state_get", "state_query", "state_put", "state_cas", "state_delete"} <= listed
    assert (_json(created), _json(stale), _json(moved)) == (
        {"matched": True, "version": 1},
        {"matched": False, "version": 1, "value": {"ok": 1}},
        {"matched": True, "version": 2},
    )
    assert _json(mine) == {"namespace": "notes", "key": "a", "scope": "persona", "version": 1}
    document = _json(shared)
    assert (document["value"], document["version"], document["written_by"]) == ({"ok": 3}, 2, "assistant")  # type: ignore[index]
    assert private.content[0].text == "null"  # the assistant's own notes are not the helper's
    assert refused.is_error and "needs the label 'state.write:team'" in refused.content[0].text
    assert not {n for n in plain if n.startswith("state_")}
    assert "Traceback" not in daemon.log(), daemon.log()
