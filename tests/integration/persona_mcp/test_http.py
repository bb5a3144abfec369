"""A persona MCP server reached over streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import uvicorn

from gateway.persona_mcp import PersonaMcpManager
from gateway.personas import Persona
from gateway.runtime.agent import ToolOutcome
from tests.fakes.mcp_echo_server import build_server


@pytest.fixture
async def http_server() -> AsyncIterator[tuple[str, list[str]]]:
    """The echo server's streamable HTTP app on 127.0.0.1; yields its URL and the
    Authorization headers it received."""
    app = build_server().streamable_http_app()
    seen: list[str] = []

    async def recording(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.extend(v.decode() for k, v in scope["headers"] if k == b"authorization")
        await app(scope, receive, send)

    config = uvicorn.Config(recording, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    for _ in range(200):
        if server.started:
            break
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}/mcp", seen
    server.should_exit = True
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)


async def test_http_server_tools_are_listed_and_called_with_its_headers(
    http_server: tuple[str, list[str]],
    make_persona: Callable[..., Persona],
    make_manager: Callable[..., PersonaMcpManager],
) -> None:
    url, seen = http_server
    persona = make_persona({"remote": {"url": url, "headers": {"Authorization": "Bearer t0ken"}}})
    manager = make_manager(persona)
    await manager.start()

    names = {s.name for s in await manager.specs(persona)}
    assert {"remote__echo", "remote__env"} <= names
    assert await manager.call(persona, "remote__echo", {"text": "over http"}) == ToolOutcome("over http")
    assert seen and set(seen) == {"Bearer t0ken"}


async def test_unreachable_http_server_gives_a_clear_error(
    make_persona: Callable[..., Persona], make_manager: Callable[..., PersonaMcpManager]
) -> None:
    persona = make_persona({"remote": {"url": "http://127.0.0.1:9/mcp"}})
    manager = make_manager(persona, start_timeout=5.0)

    outcome = await manager.call(persona, "remote__echo", {"text": "x"})
    assert outcome.is_error
    assert outcome.content.startswith("MCP server remote failed to start: ")
    assert await manager.specs(persona, wait=0) == []
