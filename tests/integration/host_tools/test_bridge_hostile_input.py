"""The bridge socket, both ends, against hostile lines: malformed, 100k-deep and oversized
JSON each get an error and the same connection keeps working."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.host_tools.conftest import BridgeEnv
from tools.bridge_client import BridgeClient, BridgeCredentials, BridgeUnavailableError
from tools.bridge_server import MAX_LINE

DEEP = b"[" * 100_000 + b"]" * 100_000


async def test_the_server_answers_each_hostile_line_and_the_connection_goes_on(bridge_env: BridgeEnv) -> None:
    identity = bridge_env.register("assistant")
    good = {
        "op": "call",
        "tool": "memory_access",
        "arguments": {"operation": "write", "key": "k", "value": "v"},
        "run_id": identity.run_id,
        "secret": identity.secret,
        "thread_id": identity.thread_id,
        "persona": identity.persona,
    }
    reader, writer = await asyncio.open_unix_connection(str(bridge_env.server.path), limit=MAX_LINE * 4)
    try:
        for line in (
            b"{not json",
            DEEP,
            b"[" * 100_000,
            b"x" * (MAX_LINE + 10),
            json.dumps({"id": 9, **good}).encode(),
        ):
            writer.write(line + b"\n")
        await writer.drain()
        async with asyncio.timeout(10):
            replies = [json.loads(await reader.readline()) for _ in range(5)]
    finally:
        writer.close()
    errors = [(r["code"], r["error"]) for r in replies[:4]]
    assert errors[0][0] == "bad_request" and errors[0][1].startswith("malformed request: not JSON (")
    assert errors[1:3] == [("bad_request", "malformed request: JSON nested deeper than 64 levels")] * 2
    assert errors[3] == ("too_large", f"request line longer than {MAX_LINE} bytes")
    assert replies[4]["id"] == 9 and replies[4]["ok"] and not replies[4]["is_error"], replies[4]


FakeReply = Callable[[dict[str, Any]], Awaitable[bytes]]


async def _fake_bridge(path: Path, answer: FakeReply, connections: list[int]) -> asyncio.AbstractServer:
    """A bridge socket answering each request line with whatever ``answer`` returns."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            while line := await reader.readline():
                writer.write(await answer(json.loads(line)))
                await writer.drain()
        finally:
            writer.close()

    return await asyncio.start_unix_server(serve, path=str(path))


@pytest.fixture
async def hostile_bridge(tmp_path: Path) -> AsyncIterator[tuple[BridgeClient, list[int]]]:
    """A client of a bridge whose reply to tool ``<kind>`` is a hostile line of that kind."""
    lines = {
        "malformed": b"{not json\n",
        "deep": DEEP + b"\n",
        "huge": b'{"id": 1, "content": "' + b"x" * (MAX_LINE * 4) + b'"}\n',
    }

    async def answer(request: dict[str, Any]) -> bytes:
        hostile = lines.get(request.get("tool", ""))
        if hostile is not None:
            return hostile
        reply = {"id": request["id"], "ok": True, "content": "fine", "is_error": False, "unknown_tool": False}
        return json.dumps(reply).encode() + b"\n"

    connections: list[int] = []
    server = await _fake_bridge(tmp_path / "bridge.sock", answer, connections)
    client = BridgeClient(BridgeCredentials(tmp_path / "bridge.sock", 1, 1, "assistant", "s"), timeout=30)
    try:
        async with client:
            yield client, connections
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("malformed", "not JSON (Expecting property name"),
        ("deep", "JSON nested deeper than 64 levels"),
        ("huge", f"line longer than {MAX_LINE * 4} bytes"),
    ],
)
async def test_the_client_fails_a_call_whose_reply_is_unreadable_and_goes_on(
    hostile_bridge: tuple[BridgeClient, list[int]], kind: str, reason: str
) -> None:
    client, connections = hostile_bridge
    async with asyncio.timeout(10):  # far below the client's own reply timeout
        with pytest.raises(
            BridgeUnavailableError, match="the bridge sent a reply that cannot be read"
        ) as caught:
            await client.call(kind, {})
        assert reason in str(caught.value)
        assert (await client.call("echo", {}))["content"] == "fine"
    assert connections == [1]  # the same connection served the good call
