"""Local servers for the web tools (an aiohttp site and a raw TCP one that drops connections),
a ToolContext that may reach 127.0.0.1, and a stub resolver for the guard's decisions."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gateway.config import NetHttpSettings, Settings
from gateway.personas import Persona
from gateway.web_settings import WebSearchSettings
from tools.base import ToolContext

LABELS = ("net.http:egress", "web.search")
ARTICLE_SENTENCES = (
    "Tide mills once lined the estuaries of Brittany, using the rising sea to turn their wheels.",
    "The ponds filled at high tide and emptied through the wheel as the water fell, which gave the "
    "millers several hours of work twice a day.",
    "Steam power ended most of them by 1900, although a few survive as museums and welcome visitors.",
)
NOISE = ("Accept all cookies", "Subscribe to our newsletter", "Copyright 2026 Coastal Media Group")


def article_html(paragraphs: int = 1) -> str:
    """An article page with navigation, a cookie banner, a sidebar and a footer around it."""
    body = "".join(f"<p>{s}</p>" for s in ARTICLE_SENTENCES)
    extra = "".join(
        f"<p>Paragraph {i} adds more about the mills of the coast, their owners and the ledgers they kept.</p>"
        for i in range(paragraphs)
    )
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Tide Mills of Brittany</title>
<script>window.analytics = {{}};</script><style>nav {{ color: red }}</style></head><body>
<div class="cookie-banner" id="cookies"><p>We use cookies to improve your experience.</p>
<button>{NOISE[0]}</button></div>
<header><nav><ul><li><a href="/">Home</a></li><li><a href="/news">News</a></li>
<li><a href="/about">About us</a></li></ul></nav></header>
<main><article><h1>The Tide Mills of Brittany</h1>{body}
<p>See <a href="https://example.org/mills">the mills register</a> for a full list.</p>{extra}</article></main>
<aside><h3>{NOISE[1]}</h3><form><input name="email"></form></aside>
<footer><p>{NOISE[2]}</p><a href="/privacy">Privacy policy</a></footer></body></html>"""


@dataclass
class Site:
    port: int = 0
    hits: list[str] = field(default_factory=list)
    seen_headers: list[dict[str, str]] = field(default_factory=list)
    routes: dict[str, Callable[[web.Request], Any]] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    """An aiohttp site; tests add handlers to ``site.routes`` by path."""
    state = Site()

    async def dispatch(request: web.Request) -> web.StreamResponse:
        state.hits.append(request.path_qs)
        state.seen_headers.append(dict(request.headers))
        handler = state.routes.get(request.path)
        if handler is None:
            return web.Response(status=404, text="no such page")
        return await handler(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", dispatch)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    state.port = runner.addresses[0][1]
    try:
        yield state
    finally:
        await runner.cleanup()


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
