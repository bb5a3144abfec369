"""Stand-ins for the web search backends of ``web_search``: SearXNG, Brave and Exa.

One real HTTP server on 127.0.0.1 (port 0) speaking one provider's wire format::

    async with FakeSearch("brave", api_key="k") as fake:   # fake.url == "http://127.0.0.1:PORT"
        ...
        fake.requests                                     # (method, path, query, headers, body)

Every query gets :data:`RESULTS` results whose titles and snippets name the query; a wrong or
missing API key gets the provider's 401. ``fake.status`` makes every answer that HTTP status.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from aiohttp import web

__all__ = ["RESULTS", "FakeSearch", "SeenRequest"]

RESULTS = 3
Provider = Literal["searxng", "brave", "exa"]


@dataclass(frozen=True, slots=True)
class SeenRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: dict[str, Any] | None


@dataclass
class FakeSearch:
    provider: Provider
    api_key: str | None = None
    status: int = 200
    requests: list[SeenRequest] = field(default_factory=list)
    url: str = ""
    _runner: web.AppRunner | None = None

    async def __aenter__(self) -> Self:
        app = web.Application()
        routes = {
            "searxng": web.get("/search", self._searxng),
            "brave": web.get("/res/v1/web/search", self._brave),
            "exa": web.post("/search", self._exa),
        }
        app.add_routes([routes[self.provider]])
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _seen(self, request: web.Request) -> SeenRequest:
        body = await request.json() if request.can_read_body else None
        seen = SeenRequest(request.method, request.path, dict(request.query), dict(request.headers), body)
        self.requests.append(seen)
        return seen

    def _refusal(self, key: str | None) -> web.Response | None:
        if self.status != 200:
            return web.json_response({"error": "scripted"}, status=self.status)
        if self.api_key is not None and key != self.api_key:
            return web.json_response({"error": "invalid api key"}, status=401)
        return None

    @staticmethod
    def _items(query: str) -> list[tuple[str, str, str]]:
        slug = "-".join(query.split()).lower()
        return [
            (f"{query}: result {i}", f"https://results.example/{slug}/{i}", f"All about {query}, part {i}.")
            for i in range(1, RESULTS + 1)
        ]

    async def _searxng(self, request: web.Request) -> web.Response:
        seen = await self._seen(request)
        if seen.query.get("format") != "json":
            return web.Response(status=403, text="format not allowed")  # SearXNG's answer
        refused = self._refusal(None)
        if refused is not None:
            return refused
        results = [
            {"title": t, "url": u, "content": c, "engine": "fake"} for t, u, c in self._items(seen.query["q"])
        ]
        return web.json_response({"query": seen.query["q"], "results": results})

    async def _brave(self, request: web.Request) -> web.Response:
        seen = await self._seen(request)
        refused = self._refusal(request.headers.get("X-Subscription-Token"))
        if refused is not None:
            return refused
        results = [
            {
                "title": t,
                "url": u,
                "description": c.replace("All", "<strong>All</strong>"),
                "age": "2 days ago",
            }
            for t, u, c in self._items(seen.query["q"])
        ]
        return web.json_response({"type": "search", "web": {"results": results}})

    async def _exa(self, request: web.Request) -> web.Response:
        seen = await self._seen(request)
        refused = self._refusal(request.headers.get("x-api-key"))
        if refused is not None:
            return refused
        query = (seen.body or {}).get("query", "")
        results = [
            {"title": t, "url": u, "highlights": [c], "publishedDate": "2026-01-02T00:00:00.000Z"}
            for t, u, c in self._items(query)
        ]
        return web.Response(text=json.dumps({"results": results}), content_type="application/json")
