"""Skills, procedures and shared findings over ``talon mcp host-tools`` with the real ``mcp``
client against ``talon run`` in a subprocess: an entry published in one session is found in
that session and not in another (each is its own root run); a procedure written over MCP is a
draft the skill tool refuses until `talon skills approve` and then loads; a persona without
the labels is not offered the tools and a direct call is refused."""

from __future__ import annotations

import asyncio
import json
import subprocess
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
LABELS = ["workspace.share", "skill.use", "memory.access:thread"]


def _params(config: Path, persona: str, thread: str) -> StdioServerParameters:
    command = [*TALON, "mcp", "host-tools", "-c", str(config), "--persona", persona, "--thread", thread]
    return StdioServerParameters(command=command[0], args=command[1:], env=talon_env(), cwd=str(REPO))


def _text(result: object) -> str:
    return result.content[0].text  # type: ignore[attr-defined]


async def test_findings_stay_in_their_session_and_a_procedure_runs_only_after_approval(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path,
        provider=OFFLINE_PROVIDER,
        model="fake:m",
        personas={
            "assistant": {"capabilities": LABELS, "skills": ["meeting-notes"]},
            "plain": {"capabilities": []},
        },
    )
    procedure = {"name": "triage-bug", "content": "# Triage a bug\n\n1. Reproduce it.\n2. Label it."}
    async with Daemon(config) as daemon:
        await daemon.start(tmp_path / "data")
        async with (
            asyncio.timeout(60),
            Client(_params(config, "assistant", "a"), read_timeout_seconds=30) as client,
        ):
            listed = {t.name for t in (await client.list_tools()).tools}
            await client.call_tool(
                "workspace_publish", {"type": "finding", "subject": "db", "content": "use postgres"}
            )
            same = json.loads(_text(await client.call_tool("workspace_query", {"query": "postgres"})))
            notes = json.loads(
                _text(await client.call_tool("skill", {"name": "meeting-notes", "arguments": "x"}))
            )
            wrote = await client.call_tool("procedure_write", procedure)
            draft = await client.call_tool("skill", {"name": "triage-bug"})
        async with (
            asyncio.timeout(60),
            Client(_params(config, "assistant", "b"), read_timeout_seconds=30) as client,
        ):
            other = json.loads(_text(await client.call_tool("workspace_query", {"query": "postgres"})))
        approved = await asyncio.to_thread(
            subprocess.run,
            [*TALON, "skills", "approve", "assistant", "triage-bug", "-c", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            env=talon_env(),
            cwd=str(REPO),
        )
        async with (
            asyncio.timeout(60),
            Client(_params(config, "assistant", "c"), read_timeout_seconds=30) as client,
        ):
            loaded = await client.call_tool("skill", {"name": "triage-bug"})
        async with (
            asyncio.timeout(60),
            Client(_params(config, "plain", "a"), read_timeout_seconds=30) as client,
        ):
            plain = {t.name for t in (await client.list_tools()).tools}
            with pytest.raises(MCPError, match="workspace_publish"):
                await client.call_tool("workspace_publish", {"type": "finding", "content": "x"})
        assert await daemon.stop() == 0
    assert {"workspace_publish", "workspace_query", "skill", "procedure_write"} <= listed
    assert "workspace_subscribe" not in listed  # a session is a root run, not a child
    assert [e["content"] for e in same["entries"]] == ["use postgres"]
    assert other == {"entries": []}
    assert notes["instructions"].startswith("# Meeting notes") and notes["files"] == ["style.md"]
    assert not wrote.is_error and json.loads(_text(wrote))["status"] == "draft"
    assert draft.is_error and "talon skills approve assistant triage-bug" in _text(draft)
    assert approved.returncode == 0, approved.stderr
    assert not loaded.is_error and json.loads(_text(loaded))["instructions"].startswith("# Triage a bug")
    assert not plain & listed
