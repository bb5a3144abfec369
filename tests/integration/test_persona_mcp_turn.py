"""A persona's own MCP server, offered next to the host tools and called in a real turn."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, say, tool_texts, write_config

ECHO_SERVER = Path(__file__).resolve().parents[1] / "fakes" / "mcp_echo_server.py"


async def test_a_persona_calls_its_own_mcp_server_in_a_turn(tmp_path: Path) -> None:
    def respond(body: dict[str, Any]) -> Reply:
        result = next(iter(tool_texts(body)), None)
        if result is None:
            return Reply(tool_calls=[Call("echo__echo", {"text": "ping through mcp"})])
        return Reply(text=f"server said: {result}")

    workspace = tmp_path / "data" / "workspaces" / "assistant" / "shared"  # the servers see /shared
    workspace.mkdir(parents=True)
    shutil.copy(ECHO_SERVER, workspace / "echo_server.py")
    async with FakeAnthropic(responder=respond) as fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            personas={
                "assistant": {
                    "capabilities": ["memory.access:thread"],
                    "mcp_servers": {
                        "echo": {"command": sys.executable, "args": ["echo_server.py"], "sandbox": "none"}
                    },
                }
            },
        )
        async with running_gateway(config) as gw:
            persona = gw.personas["assistant"]
            async with asyncio.timeout(60):
                while not gw.components.persona_mcp.cached_specs(persona):
                    await asyncio.sleep(0.05)
            turn = await say(gw, "use your server")
        tools = [t["name"] for t in fake.requests[0]["tools"]]
        assert "echo__echo" in tools and "memory_access" in tools
        assert turn.text == "server said: ping through mcp"
        assert json.dumps(fake.requests[0]["tools"]).count("__talond_") == 0
