"""web_request and web_scrape in real turns: the fake model reads an article, calls an API with a
persona credential and searches; the token never reaches the model, the audit log or the logs;
and the labels decide what each persona is offered and may call."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.fakes.search_api import FakeSearch
from tests.fakes.web_pages import ARTICLE_SENTENCES, NOISE, WebSite, article_html
from tests.harness import provider_for, running_gateway, say, tool_results, write_config
from tests.store_helpers import fetch_rows

TOKEN = "mills-token-8c1f2e9d77"


def _config(tmp_path: Path, fake: FakeAnthropic, labels: list[str], search_url: str | None = None) -> Path:
    extra: dict[str, Any] = {"net_http": {"allowed_private_hosts": ["127.0.0.1"]}}
    if search_url:
        extra["web_search"] = {"provider": "searxng", "url": search_url}
    return write_config(
        tmp_path,
        provider=provider_for(fake),
        extra=extra,
        personas={"assistant": {"capabilities": labels, "credentials": ["MILLS_API_TOKEN"]}},
    )


def _offered(body: dict[str, Any]) -> list[str]:
    return [t["name"] for t in body.get("tools", [])]


async def test_a_turn_reads_a_page_calls_an_api_and_searches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MILLS_API_TOKEN", TOKEN)
    caplog.set_level(logging.DEBUG)

    async def api(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.json_response({"error": "unauthorized"}, status=401)
        return web.json_response({"mills": 42, "echo": request.headers["Authorization"]})

    async with WebSite() as site, FakeSearch("searxng") as search, FakeAnthropic() as fake:
        site.page("/mills", article_html())
        site.routes["/api/count"] = api
        fake.script(
            Reply(tool_calls=[Call("web_scrape", {"url": site.url("/mills")})]),
            Reply(
                tool_calls=[
                    Call(
                        "web_request",
                        {"url": site.url("/api/count"), "method": "GET", "credential": "MILLS_API_TOKEN"},
                    )
                ]
            ),
            Reply(tool_calls=[Call("web_scrape", {"mode": "search", "query": "tide mills"})]),
            Reply(text="There are 42 mills."),
        )
        async with running_gateway(
            _config(tmp_path, fake, ["net.http:egress", "web.search"], search.url)
        ) as gw:
            turn = await say(gw, "how many tide mills are there?", timeout=60)
            await gw.components.host_tools.bridge.audit.flush()
            audit = await fetch_rows(
                gw.components.db, "SELECT tool, decision, status, detail FROM audit_log ORDER BY id"
            )
        requests = list(fake.requests)
    assert turn.status == "completed" and turn.text == "There are 42 mills."
    assert {"web_request", "web_scrape"} <= set(_offered(requests[0]))
    system = json.dumps(requests[0].get("system", ""))
    assert "web_request and web_scrape" in system and "Web search (web_scrape" in system
    results = tool_results(requests[3])
    assert [error for error, _ in results] == [False, False, False]
    page, api_result, found = (json.loads(text) for _, text in results)
    for sentence in ARTICLE_SENTENCES:
        assert sentence in page["content"]
    assert not any(noise in page["content"] for noise in NOISE)
    assert api_result["status"] == 200
    assert api_result["body"] == {"mills": 42, "echo": "Bearer [credential]"}
    assert site.seen_headers[-1]["Authorization"] == f"Bearer {TOKEN}"
    assert found["results"][0]["url"] == "https://results.example/tide-mills/1"
    assert search.requests[0].query["q"] == "tide mills"
    # The token reached the API and nothing else: not the model, not the audit log, not the logs.
    assert TOKEN not in json.dumps(requests)
    assert TOKEN not in json.dumps([dict(r) for r in audit])
    assert TOKEN not in caplog.text
    allowed = [r["detail"] for r in audit if r["tool"] == "web_request" and r["decision"] == "allowed"]
    assert allowed == ["allowed by net.http:egress; args: credential, method, url"]


async def test_labels_decide_which_web_tools_a_persona_gets(tmp_path: Path) -> None:
    async with WebSite() as site, FakeAnthropic() as fake:
        site.page("/mills", article_html())
        fake.script(
            Reply(tool_calls=[Call("web_scrape", {"mode": "search", "query": "tide mills"})]),
            Reply(tool_calls=[Call("web_request", {"url": site.url("/mills"), "method": "GET"})]),
            Reply(text="I cannot search or call APIs here."),
        )
        # Search only: web_scrape is offered, but reading pages needs net.http:egress.
        async with running_gateway(_config(tmp_path, fake, ["web.search"])) as gw:
            turn = await say(gw, "find tide mills", timeout=60)
        requests = list(fake.requests)
    assert turn.status == "completed"
    offered = _offered(requests[0])
    assert "web_scrape" in offered and "web_request" not in offered and "net_http" not in offered
    [(search_error, search_text)] = tool_results(requests[1])
    assert search_error and "web search is not configured" in search_text
    [_, (request_error, request_text)] = tool_results(requests[2])
    assert request_error and "web_request" in request_text
    assert site.hits == []


async def test_reading_a_page_without_net_http_is_refused_by_the_bridge(tmp_path: Path) -> None:
    async with WebSite() as site, FakeAnthropic() as fake:
        site.page("/mills", article_html())
        fake.script(
            Reply(tool_calls=[Call("web_scrape", {"url": site.url("/mills")})]),
            Reply(text="I may not read pages."),
        )
        async with running_gateway(_config(tmp_path, fake, ["web.search"])) as gw:
            await say(gw, "read the mills page", timeout=60)
            await gw.components.host_tools.bridge.audit.flush()
            audit = await fetch_rows(
                gw.components.db, "SELECT tool, decision, detail FROM audit_log ORDER BY id"
            )
        requests = list(fake.requests)
    [(error, text)] = tool_results(requests[1])
    assert error and "web_scrape needs the capability 'net.http:egress'" in text
    assert [(r["tool"], r["decision"]) for r in audit] == [("web_scrape", "refused")]
    assert site.hits == []
