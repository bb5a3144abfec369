"""A persona MCP server printing hostile lines (malformed, 100k-deep, oversized, not UTF-8,
not JSON-RPC): each call fails at once with a clear tool error, and the same server process
serves the next call."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.persona_mcp import PersonaMcpManager
from gateway.persona_mcp.transport import MAX_MESSAGE_BYTES
from gateway.personas import Persona

HOSTILE_SERVER = Path(__file__).with_name("hostile_mcp_server.py")
UNREADABLE = "failed: the MCP server's reply could not be read"


async def test_hostile_replies_become_tool_errors_and_the_server_keeps_serving(
    make_persona: Callable[..., Persona],
    make_manager: Callable[..., PersonaMcpManager],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The call timeout is far longer than the test allows: a reply that is never read fails it.
    entry = {"command": sys.executable, "args": [str(HOSTILE_SERVER)], "sandbox": "none", "timeout": 120}
    persona = make_persona({"bad": entry})
    manager = make_manager(persona)
    async with asyncio.timeout(30):
        pid = (await manager.call(persona, "bad__echo", {})).content
        outcomes = {
            kind: await manager.call(persona, f"bad__{kind}", {})
            for kind in ("malformed", "deep", "deep_reply", "huge", "bad_utf8", "not_rpc")
        }
        after = await manager.call(persona, "bad__echo", {})

    assert all(o.is_error for o in outcomes.values())
    reasons = {kind: o.content for kind, o in outcomes.items()}
    assert reasons["malformed"].startswith(f"malformed {UNREADABLE} (not JSON (Expecting property name")
    assert reasons["deep"] == f"deep {UNREADABLE} (JSON nested deeper than 64 levels)"
    assert reasons["deep_reply"] == f"deep_reply {UNREADABLE} (JSON nested deeper than 64 levels)"
    assert reasons["huge"] == f"huge {UNREADABLE} (line longer than {MAX_MESSAGE_BYTES} bytes)"
    assert reasons["bad_utf8"].startswith(f"bad_utf8 {UNREADABLE} (not valid UTF-8")
    assert reasons["not_rpc"].startswith(f"not_rpc {UNREADABLE} (not a JSON-RPC message")
    assert not after.is_error and after.content == pid  # the same process, still serving
    # Reported once: a server printing garbage in a loop does not flood the log.
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "not a message" in r.getMessage()]
    assert [r.getMessage() for r in warned] == [
        "MCP server alice/bad printed a line that is not a message: "
        + reasons["malformed"].removeprefix(f"malformed {UNREADABLE} (")[:-1]
    ]
