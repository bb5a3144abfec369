"""The child-agent tools over ``talon mcp host-tools`` with the real ``mcp`` client against
``talon run`` in a subprocess: a foreground child runs in the daemon on the model stand-in
and its result comes back; an unknown job is an error the model can act on; a persona
without ``agent.dispatch`` is not offered ``agent`` and a direct call is refused."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.e2e.daemon import TALON, Daemon, talon_env
from tests.fakes.model_api import FakeAnthropic, Reply
from tests.harness import provider_for, write_config

REPO = Path(__file__).resolve().parents[2]


def _params(config: Path, persona: str) -> StdioServerParameters:
    command = [*TALON, "mcp", "host-tools", "-c", str(config), "--persona", persona, "--thread", "kids"]
    return StdioServerParameters(command=command[0], args=command[1:], env=talon_env(), cwd=str(REPO))


async def test_agent_runs_a_child_in_the_daemon_and_the_label_decides(tmp_path: Path) -> None:
    fake = FakeAnthropic(responder=lambda body: Reply(text="child answer", input_tokens=7, output_tokens=3))
    async with fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            personas={
                "assistant": {"capabilities": ["agent.dispatch", "jobs.manage"]},
                "plain": {"capabilities": ["git.read"]},
            },
        )
        async with Daemon(config) as daemon:
            await daemon.start(tmp_path / "data")
            async with (
                asyncio.timeout(60),
                Client(_params(config, "assistant"), read_timeout_seconds=30) as client,
            ):
                listed = {t.name for t in (await client.list_tools()).tools}
                ran = await client.call_tool("agent", {"prompt": "say something"})
                unknown = await client.call_tool("get_background_job_health", {"jobId": "nope"})
            async with (
                asyncio.timeout(60),
                Client(_params(config, "plain"), read_timeout_seconds=30) as client,
            ):
                plain = {t.name for t in (await client.list_tools()).tools}
                with pytest.raises(MCPError, match=r"agent\.dispatch"):
                    await client.call_tool("agent", {"prompt": "say something"})
            assert await daemon.stop() == 0
    assert {"agent", "compose", "get_background_job_health", "send_message_to_agent"} <= listed
    assert "emit_progress" not in listed
    result = json.loads(ran.content[0].text)  # type: ignore[union-attr]
    assert result["result"] == "child answer"
    assert result["usage"] == {"input_tokens": 7, "output_tokens": 3, "model_calls": 1}
    assert unknown.is_error and "no background job 'nope'" in unknown.content[0].text  # type: ignore[union-attr]
    assert "agent" not in plain
    assert "say something" in json.dumps(fake.requests[0]["messages"][0])
