"""Pages served on 127.0.0.1 for the browser tests, and a stub resolver for the guard's decisions.

No test sends a packet to a non-loopback address: names the pages use for other addresses
are answered by :class:`StubResolver`, and the guard refuses them before any connection.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tools.base import ToolError
from tools.ssrf import IPAddress

COUNTER = """<!doctype html><html><head><title>Counter</title></head><body>
<h1 id="status">Not clicked</h1>
<button id="go" onclick="document.getElementById('status').textContent='Clicked!'">Press me</button>
<a href="/form">The form</a>
</body></html>"""

FORM = """<!doctype html><html><head><title>Sign up</title></head><body>
<form action="/submit" method="post">
<label for="email">Email</label><input id="email" name="email" type="email">
<label for="size">Size</label><select id="size" name="size"><option value="s">Small</option>
<option value="l">Large</option></select>
<input type="password" name="secret" aria-label="Password">
<button type="submit">Send</button>
</form></body></html>"""

BLOCKED = """<!doctype html><html><head><title>Sneaky</title></head><body><p>hello</p>
<img src="http://metadata.test/latest/meta-data/">
<script>fetch('http://intranet.test/secret').catch(() => {});</script>
</body></html>"""


@dataclass
class Pages:
    port: int
    hits: list[str] = field(default_factory=list)

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@asynccontextmanager
async def serve_pages(extra: dict[str, Any] | None = None) -> AsyncIterator[Pages]:
    """The test site on a free port of 127.0.0.1."""
    pages = Pages(port=0)

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        pages.hits.append(request.path_qs)
        return await handler(request)

    def html(text: str) -> Any:
        async def handler(request: web.Request) -> web.Response:
            return web.Response(text=text, content_type="text/html")

        return handler

    async def submit(request: web.Request) -> web.Response:
        form = await request.post()
        body = (
            f"<html><head><title>Thanks</title></head><body><p>Signed up {form['email']} ({form['size']})</p>"
        )
        return web.Response(text=body + "</body></html>", content_type="text/html")

    async def loop(request: web.Request) -> web.Response:
        raise web.HTTPFound("/loop")

    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        await response.prepare(request)
        for _ in range(200):  # bounded: at most 20 s, and the client gives up first
            try:
                await response.write(b"<p>.</p>")
            except ConnectionError:
                break
            await asyncio.sleep(0.1)
        return response

    async def download(request: web.Request) -> web.Response:
        return web.Response(
            body=b"a,b\n1,2\n",
            headers={
                "Content-Type": "text/csv",
                "Content-Disposition": 'attachment; filename="../report.csv"',
            },
        )

    async def redirect_out(request: web.Request) -> web.Response:
        raise web.HTTPFound("http://metadata.test/")

    routes = [
        web.get("/", html(COUNTER)),
        web.get("/form", html(FORM)),
        web.post("/submit", submit),
        web.get("/blocked", html(BLOCKED)),
        web.get("/loop", loop),
        web.get("/trickle", trickle),
        web.get("/download", download),
        web.get(
            "/hang",
            html("<html><head><title>Busy</title></head><body><p>working</p></body></html>"),
        ),
        web.get("/redirect-out", redirect_out),
        web.get("/huge", html("<html><body>" + "<button>b</button>" * 30_000 + "</body></html>")),
    ]
    routes += [web.get(path, html(text)) for path, text in (extra or {}).items()]
    app = web.Application(middlewares=[record])
    app.add_routes(routes)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    pages.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield pages
    finally:
        await runner.cleanup()


class StubResolver:
    """Answers the guard's lookups from a table; records what was asked."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers, self.asked = answers, []

    async def __call__(self, host: str, port: int) -> list[IPAddress]:
        self.asked.append(host)
        try:
            return [ipaddress.ip_address(host)]
        except ValueError:
            pass
        if host not in self.answers:
            raise ToolError(f"could not resolve {host}")
        return [ipaddress.ip_address(self.answers[host])]
