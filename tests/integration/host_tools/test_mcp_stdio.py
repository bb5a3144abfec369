"""The stdio transport of ``talon mcp host-tools``, byte for byte on real pipes: one JSON-RPC
message per line, malformed lines answered without ending the session, long lines whole,
and stray prints kept off the wire."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tests.e2e.daemon import talon_env

REPO = Path(__file__).resolve().parents[3]
APP = [sys.executable, "-m", "tests.integration.host_tools.stdio_app"]
LONG = 3 * (1 << 20)  # longer than one read of the transport


def requests(*extra: bytes) -> bytes:
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "echo_length", "arguments": {"text": "é" * LONG}},
    }
    return (
        b"".join(json.dumps(line).encode() + b"\n" for line in lines)
        + b"".join(extra)
        + (json.dumps(call).encode() + b"\n")
    )


async def run_app(stdin: Any, data: bytes | None) -> tuple[list[str], str]:
    env = talon_env()
    env.pop("PYTHONUNBUFFERED", None)  # stray prints sit in stdout's buffer, as they usually do
    proc = await asyncio.create_subprocess_exec(
        *APP, stdin=stdin, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO, env=env
    )
    out, err = await asyncio.wait_for(proc.communicate(data), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode().splitlines(), err.decode()


def replies(lines: list[str]) -> dict[Any, dict[str, Any]]:
    return {message["id"]: message for message in map(json.loads, lines)}


async def test_messages_on_pipes_with_a_malformed_and_a_long_line() -> None:
    lines, err = await run_app(asyncio.subprocess.PIPE, requests(b"this is not JSON\n", b"\n"))
    assert lines[-1] == "served"  # stdout is the process's own again after serving
    answered = replies(lines[:-1])  # every line on the wire is a JSON-RPC message
    assert answered[1]["result"]["serverInfo"]["name"] == "stdio-app"
    assert answered[2]["result"]["content"] == [{"type": "text", "text": str(LONG)}]
    assert "stray output from a tool" in err


async def test_stdin_from_a_file_is_served_too(tmp_path: Path) -> None:
    # Not a pipe: served by the SDK's transport, with the same contract.
    requests_file = tmp_path / "requests.jsonl"
    requests_file.write_bytes(requests())
    with requests_file.open("rb") as stdin:
        lines, err = await run_app(stdin, None)
    assert replies(lines[:-1])[2]["result"]["content"] == [{"type": "text", "text": str(LONG)}]
    assert "stray output from a tool" in err
