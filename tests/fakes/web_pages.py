"""A local web site for the web tools: pages on 127.0.0.1 that tests add by path.

::

    async with WebSite() as site:                # site.url("/mills") == "http://127.0.0.1:PORT/mills"
        site.page("/mills", article_html())
        site.routes["/api"] = handler           # any aiohttp handler
        site.hits, site.seen_headers             # every request, in order

:func:`article_html` is an article with navigation noise around it (menus, a cookie banner,
a newsletter box and a footer): what extraction must keep is in :data:`ARTICLE_SENTENCES`, what
it must drop in :data:`NOISE`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Self

from aiohttp import web

__all__ = ["ARTICLE_SENTENCES", "NOISE", "WebSite", "article_html"]

ARTICLE_SENTENCES = (
    "Tide mills once lined the estuaries of Brittany, using the rising sea to turn their wheels.",
    "The ponds filled at high tide and emptied through the wheel as the water fell, which gave the "
    "millers several hours of work twice a day.",
    "Steam power ended most of them by 1900, although a few survive as museums and welcome visitors.",
)
NOISE = ("Accept all cookies", "Subscribe to our newsletter", "Copyright 2026 Coastal Media Group")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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
class WebSite:
    port: int = 0
    hits: list[str] = field(default_factory=list)
    seen_headers: list[dict[str, str]] = field(default_factory=list)
    routes: dict[str, Handler] = field(default_factory=dict)
    _runner: web.AppRunner | None = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def page(self, path: str, text: str, content_type: str = "text/html") -> None:
        """Serve ``text`` at ``path``."""

        async def serve(request: web.Request) -> web.Response:
            return web.Response(text=text, content_type=content_type)

        self.routes[path] = serve

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.hits.append(request.path_qs)
        self.seen_headers.append(dict(request.headers))
        handler = self.routes.get(request.path)
        if handler is None:
            return web.Response(status=404, text="no such page")
        return await handler(request)

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
