"""The shared NDJSON socket server: owner-only socket, requests answered in order or
concurrently, a failing request answered without ending the connection."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.ndjson_socket import NDJSONServer, Reply


class _Echo(NDJSONServer):
    """Replies ``{"echo": <id>}`` after ``sleep`` seconds; op ``boom`` raises."""

    def __init__(self, path: Path, **options: Any):
        super().__init__(path, max_line=1024, **options)
        self.cancelled: list[Any] = []

    async def handle_request(self, request: dict[str, Any], reply: Reply) -> None:
        if request.get("op") == "boom":
            raise RuntimeError("boom")
        try:
            await asyncio.sleep(request.get("sleep", 0))
        except asyncio.CancelledError:
            self.cancelled.append(request["id"])
            raise
        await reply({"echo": request["id"]})

    def refusal(self, reason: str, *, too_long: bool) -> dict[str, Any]:
        return {"refused": reason, "too_long": too_long}

    def failure(self, request: dict[str, Any], exc: Exception) -> dict[str, Any]:
        return {"failed": request.get("id"), "error": str(exc)}


async def _started(server: _Echo) -> AsyncIterator[_Echo]:
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def in_order(tmp_path: Path) -> AsyncIterator[_Echo]:
    async for server in _started(_Echo(tmp_path / "in-order.sock")):
        yield server


@pytest.fixture
async def concurrent(tmp_path: Path) -> AsyncIterator[_Echo]:
    async for server in _started(_Echo(tmp_path / "concurrent.sock", max_in_flight=4, skip_blank_lines=True)):
        yield server


@pytest.fixture(params=[1, 4], ids=["in-order", "concurrent"])
async def either(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[_Echo]:
    async for server in _started(_Echo(tmp_path / "either.sock", max_in_flight=request.param)):
        yield server


async def _exchange(server: _Echo, *requests: dict[str, Any] | bytes, expect: int) -> list[dict[str, Any]]:
    reader, writer = await asyncio.open_unix_connection(str(server.path))
    try:
        for request in requests:
            writer.write(request if isinstance(request, bytes) else json.dumps(request).encode() + b"\n")
        await writer.drain()
        async with asyncio.timeout(5):
            return [json.loads(await reader.readline()) for _ in range(expect)]
    finally:
        writer.close()


async def test_the_socket_is_owner_only_replaces_a_stale_file_and_is_removed_on_stop(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    path.write_text("left by a crashed daemon")
    server = _Echo(path)
    await server.start()
    mode = path.stat().st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    assert await _exchange(server, {"id": 1}, expect=1) == [{"echo": 1}]
    await server.stop()
    assert not path.exists()


async def test_in_order_a_slow_request_is_answered_before_the_next_line_is_read(in_order: _Echo) -> None:
    replies = await _exchange(in_order, {"id": 1, "sleep": 0.2}, b"\n", {"id": 2}, expect=3)
    assert replies[0] == {"echo": 1}
    assert replies[1]["refused"].startswith("not JSON (Expecting value") and not replies[1]["too_long"]
    assert replies[2] == {"echo": 2}


async def test_concurrently_a_slow_request_does_not_hold_up_the_next(concurrent: _Echo) -> None:
    replies = await _exchange(concurrent, {"id": 1, "sleep": 0.2}, b"  \n", {"id": 2}, expect=2)
    assert replies == [{"echo": 2}, {"echo": 1}]  # the blank line was skipped


async def test_concurrently_requests_still_running_when_the_client_leaves_are_cancelled(
    concurrent: _Echo,
) -> None:
    _, writer = await asyncio.open_unix_connection(str(concurrent.path))
    writer.write(json.dumps({"id": 7, "sleep": 30}).encode() + b"\n")
    await writer.drain()
    await asyncio.sleep(0.1)
    writer.close()
    async with asyncio.timeout(5):
        while not concurrent.cancelled:
            await asyncio.sleep(0.01)
    assert concurrent.cancelled == [7]


async def test_lines_that_are_not_requests_and_failing_requests_are_answered_and_the_connection_goes_on(
    either: _Echo,
) -> None:
    replies = await _exchange(
        either, b"[1]\n", b"x" * 2000 + b"\n", {"id": 1, "op": "boom"}, {"id": 2}, expect=4
    )
    assert replies[:2] == [
        {"refused": "a request is a JSON object", "too_long": False},
        {"refused": "line longer than 1024 bytes", "too_long": True},
    ]
    assert sorted(replies[2:], key=str) == [{"echo": 2}, {"error": "boom", "failed": 1}]
