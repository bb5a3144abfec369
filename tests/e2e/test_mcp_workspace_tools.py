"""The file tools over ``talon mcp host-tools`` with the real ``mcp`` client: a running daemon's
thread workspace is written, read and searched; escapes are refused as tool errors; a persona
without the labels is not offered the tools and a direct call is refused."""

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
OFFLINE_PROVIDER = {
    "type": "openai",
    "base_url": "http://127.0.0.1:9/v1",
    "api_key": "none",
    "max_retries": 0,
}


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[Path]:
    config = write_config(
        tmp_path,
        provider=OFFLINE_PROVIDER,
        model="fake:m",
        personas={
            "assistant": {"capabilities": ["fs.read:thread", "fs.write:thread"]},
            "plain": {"capabilities": ["memory.access:thread"]},
        },
    )
    async with Daemon(config) as running:
        await running.start(tmp_path / "data")
        yield config
        assert await running.stop() == 0
    assert "Traceback" not in running.log(), running.log()


def _params(config: Path, persona: str, thread: str) -> StdioServerParameters:
    command = [*TALON, "mcp", "host-tools", "-c", str(config), "--persona", persona, "--thread", thread]
    return StdioServerParameters(command=command[0], args=command[1:], env=talon_env(), cwd=str(REPO))


async def test_the_mcp_client_uses_the_thread_workspace(daemon: Path) -> None:
    async with (
        asyncio.timeout(60),
        Client(_params(daemon, "assistant", "files"), read_timeout_seconds=30) as client,
    ):
        listed = {t.name for t in (await client.list_tools()).tools}
        wrote = await client.call_tool("write_file", {"file_path": "notes/todo.md", "content": "- ship it\n"})
        read = await client.call_tool("read_file", {"file_path": "/workspace/notes/todo.md"})
        found = await client.call_tool("grep", {"pattern": "ship"})
        escape = await client.call_tool("read_file", {"file_path": "../../../../talon.db"})
        absolute = await client.call_tool("list_directory", {"path": "/proc/self/root"})
    assert {"read_file", "write_file", "edit_file", "glob", "grep", "json_query", "list_directory"} <= listed
    assert json.loads(wrote.content[0].text)["file_path"] == "/workspace/notes/todo.md"
    assert read.content[0].text.startswith("     1\t- ship it")
    assert found.content[0].text.startswith("/workspace/notes/todo.md:1:- ship it")
    assert escape.is_error and "climbs above /workspace" in escape.content[0].text
    assert absolute.is_error and "outside the workspace" in absolute.content[0].text
    threads = list((daemon.parent / "data" / "workspaces" / "assistant" / "threads").iterdir())
    assert [(t / "notes" / "todo.md").read_text() for t in threads] == ["- ship it\n"]


async def test_a_persona_without_the_labels_is_refused(daemon: Path) -> None:
    async with (
        asyncio.timeout(60),
        Client(_params(daemon, "plain", "files"), read_timeout_seconds=30) as client,
    ):
        listed = {t.name for t in (await client.list_tools()).tools}
        with pytest.raises(MCPError, match="read_file"):
            await client.call_tool("read_file", {"file_path": "a.txt"})
    assert listed == {"memory_access", "memory_search", "memory_update", "procedure_write"}
