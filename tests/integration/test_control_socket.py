"""The control socket, both ends, against hostile lines: malformed, 100k-deep and oversized
JSON each get an error reply, and the next request is served."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.control import MAX_LINE, SOCKET_NAME, ControlServer
from gateway.control_client import ControlClient
from gateway.events import EventBus
from gateway.poster import NotifyError, Posted
from gateway.status import StatusReport

DEEP = b"[" * 100_000 + b"]" * 100_000


class _Status:
    """A status that ``ping`` never asks for."""

    async def report(self) -> StatusReport:
        return StatusReport(
            pid=0, uptime=0.0, channels={}, running_turns=0, queue={}, outbox={}, dead_letters=[]
        )


class _Notifier:
    async def notify(self, channel: str, chat: str | None, text: str) -> Posted:
        raise NotifyError("not in this test")


@pytest.fixture
async def control(tmp_path: Path) -> AsyncIterator[ControlServer]:
    server = ControlServer(
        tmp_path / SOCKET_NAME,
        bus=EventBus(),
        consoles={},
        status=_Status(),
        notifier=_Notifier(),
        personas=(),
    )
    await server.start()
    yield server
    await server.stop()


async def test_the_server_answers_each_hostile_line_and_the_connection_goes_on(
    control: ControlServer,
) -> None:
    reader, writer = await asyncio.open_unix_connection(str(control.path), limit=MAX_LINE)
    try:
        for line in (b"{not json", DEEP, b"[" * 100_000, b"x" * (MAX_LINE + 10), b"[1]", b'{"op": "ping"}'):
            writer.write(line + b"\n")
        await writer.drain()
        async with asyncio.timeout(10):
            replies = [json.loads(await reader.readline()) for _ in range(6)]
    finally:
        writer.close()
    errors = [r["error"] for r in replies[:5]]
    assert all(r["type"] == "error" for r in replies[:5])
    assert errors[0].startswith("malformed request: not JSON (Expecting property name")
    assert errors[1:] == [
        "malformed request: JSON nested deeper than 64 levels",
        "malformed request: JSON nested deeper than 64 levels",
        f"malformed request: line longer than {MAX_LINE} bytes",
        "malformed request: a request is a JSON object",
    ]
    assert replies[5] == {"type": "done", "pid": os.getpid()}


@pytest.fixture
async def hostile_daemon(tmp_path: Path) -> AsyncIterator[Path]:
    """A control socket whose reply to op ``<kind>`` is a hostile line of that kind."""
    lines = {
        "malformed": b"{not json\n",
        "deep": DEEP + b"\n",
        "huge": b'{"type": "done", "x": "' + b"x" * MAX_LINE + b'"}\n',
        "list": b"[1, 2]\n",
    }

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                op = json.loads(line)["op"]
                writer.write(lines.get(op, b'{"type": "done", "pid": 1}\n'))
                await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_unix_server(serve, path=str(tmp_path / SOCKET_NAME))
    yield tmp_path
    server.close()
    await server.wait_closed()


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("malformed", "not JSON (Expecting property name"),
        ("deep", "JSON nested deeper than 64 levels"),
        ("huge", f"line longer than {MAX_LINE} bytes"),
        ("list", "a reply is a JSON object"),
    ],
)
async def test_the_client_ends_an_unreadable_exchange_with_an_error_reply(
    hostile_daemon: Path, kind: str, reason: str
) -> None:
    async with asyncio.timeout(10):
        async with ControlClient(hostile_daemon) as client:
            replies = [r async for r in client.stream({"op": kind})]
        assert len(replies) == 1 and replies[0]["type"] == "error"
        assert replies[0]["error"].startswith(f"unreadable reply from the daemon: {reason}")
        async with ControlClient(hostile_daemon) as client:
            assert await client.call({"op": "ping"}) == {"type": "done", "pid": 1}
