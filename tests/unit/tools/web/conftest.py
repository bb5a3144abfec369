"""Local servers for the web tools (an aiohttp site and a raw TCP one that drops connections),
a ToolContext that may reach 127.0.0.1, and a stub resolver for the guard's decisions."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.config import NetHttpSettings, Settings
from gateway.personas import Persona
from gateway.web_settings import WebSearchSettings
from tests.fakes.web_pages import WebSite
from tools.base import ToolContext
from tools.web import render

LABELS = ("net.http:egress", "web.search")
Site = WebSite


@pytest.fixture(autouse=True)
def no_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Chromium here: a thin page is not rendered (tests/integration covers the real one)."""

    async def unavailable(ctx: ToolContext, url: str, timeout: float) -> None:
        return None

    monkeypatch.setattr(render, "render_html", unavailable)


@pytest.fixture
async def site() -> AsyncIterator[WebSite]:
    """A local site; tests add handlers to ``site.routes`` by path."""
    async with WebSite() as running:
        yield running


@dataclass
class Dropper:
    """A raw HTTP server: the first ``drops`` requests lose their connection, later ones get 200."""

    drops: int
    port: int = 0
    requests: int = 0


@pytest.fixture
async def dropper() -> AsyncIterator[Callable[[int], Dropper]]:
    servers: list[asyncio.Server] = []

    async def start(drops: int) -> Dropper:
        state = Dropper(drops)

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
                length = next(
                    (
                        int(line.split(b":", 1)[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                if length:
                    await asyncio.wait_for(reader.readexactly(length), 5)
                state.requests += 1
                if state.requests > state.drops:
                    body = b'{"ok": true}'
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                        + f"Content-Length: {len(body)}\r\n\r\n".encode()
                        + (b"" if head.startswith(b"HEAD ") else body)
                    )
                    await writer.drain()
            except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        servers.append(server)
        state.port = server.sockets[0].getsockname()[1]
        return state

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


def make_persona(tmp_path: Path, labels: tuple[str, ...] = LABELS, **kwargs: Any) -> Persona:
    return Persona(
        name="assistant",
        provider="local",
        model="m",
        description=None,
        capabilities=labels,
        system_prompt="# Assistant",
        path=tmp_path,
        **kwargs,
    )


def make_ctx(
    tmp_path: Path,
    *,
    private: tuple[str, ...] = ("127.0.0.1",),
    search: dict[str, Any] | None = None,
    **persona: Any,
) -> ToolContext:
    settings = Settings(
        net_http=NetHttpSettings(allowed_private_hosts=list(private)),
        web_search=WebSearchSettings(**(search or {})),
    )
    return ToolContext(thread_id=1, persona=make_persona(tmp_path, **persona), db=None, settings=settings)  # type: ignore[arg-type]


def stub_dns(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[str]]) -> list[str]:
    """Answer lookups from ``answers`` (nothing leaves the machine); the names asked, in order."""
    loop = asyncio.get_running_loop()
    asked: list[str] = []

    async def getaddrinfo(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        asked.append(host)
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in answers[host]
        ]

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)
    return asked
