"""web_scrape against local pages and the search stand-ins: extraction, raw, limits, search."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.fakes.search_api import RESULTS, FakeSearch
from tests.fakes.web_pages import ARTICLE_SENTENCES, NOISE, article_html
from tests.unit.tools.web.conftest import Site, make_ctx, stub_dns
from tools.base import ToolContext, ToolError
from tools.web import render, web_scrape


async def scrape(ctx: ToolContext, **args: Any) -> dict[str, Any]:
    return await web_scrape.TOOL.handler(ctx, args)


def serve(site: Site, path: str, text: str, content_type: str = "text/html") -> None:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=text, content_type=content_type)

    site.routes[path] = page


async def test_an_article_scrapes_to_its_text_without_the_noise(site: Site, tmp_path: Path) -> None:
    serve(site, "/mills", article_html())
    result = await scrape(make_ctx(tmp_path), url=site.url("/mills"))
    content = result["content"]
    assert result["title"] == "Tide Mills of Brittany"
    assert content.startswith("# The Tide Mills of Brittany")
    for sentence in ARTICLE_SENTENCES:
        assert sentence in content
    for noise in (*NOISE, "About us", "Privacy policy", "We use cookies"):
        assert noise not in content
    assert "[the mills register](https://example.org/mills)" in content
    assert result["truncated"] is False
    assert "advisory" not in result


async def test_a_long_article_is_cut_to_head_and_tail(site: Site, tmp_path: Path) -> None:
    serve(site, "/long", article_html(paragraphs=600))
    result = await scrape(make_ctx(tmp_path), url=site.url("/long"), max_bytes=5_000)
    content = result["content"]
    assert result["truncated"] is True
    assert len(content.encode()) <= 5_000
    assert content.startswith("# The Tide Mills of Brittany")
    assert content.rstrip().endswith("the ledgers they kept.")
    assert "bytes left out" in content


async def test_a_page_whose_text_mostly_did_not_survive_gets_the_advisory(site: Site, tmp_path: Path) -> None:
    tabs = "".join(
        f"<li><a href='/t{i}'>Tab heading number {i} of the product comparison widget</a></li>"
        for i in range(120)
    )
    page = f"<html><head><title>Tabs</title></head><body><ul class='tabs'>{tabs}</ul>{article_html()}</body></html>"
    serve(site, "/tabs", page)
    result = await scrape(make_ctx(tmp_path), url=site.url("/tabs"))
    assert ARTICLE_SENTENCES[0] in result["content"]
    assert result["advisory"].startswith("Extraction advisory: this page has")
    assert 'mode: "raw"' in result["advisory"]


async def test_a_script_built_page_is_rendered_when_a_browser_can(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shell = "<html><head><title>App</title><script src='/app.js'></script></head><body><div id='root'></div></body></html>"
    serve(site, "/app", shell)
    result = await scrape(make_ctx(tmp_path), url=site.url("/app"))
    assert result["content"] == ""
    assert "may build its content with scripts" in result["note"]
    assert "rendered" not in result

    rendered_for: list[str] = []

    async def renderer(ctx: ToolContext, url: str, timeout: float) -> str:
        rendered_for.append(url)
        return article_html()

    monkeypatch.setattr(render, "render_html", renderer)
    again = await scrape(make_ctx(tmp_path), url=site.url("/app"))
    assert rendered_for == [site.url("/app")]
    assert again["rendered"] is True
    assert ARTICLE_SENTENCES[1] in again["content"]


async def test_raw_returns_the_body_as_it_came(site: Site, tmp_path: Path) -> None:
    serve(site, "/feed", "<rss><channel><title>Mills</title></channel></rss>", "application/rss+xml")
    result = await scrape(make_ctx(tmp_path), mode="raw", url=site.url("/feed"))
    assert result["content"] == "<rss><channel><title>Mills</title></channel></rss>"
    assert result["content_type"] == "application/rss+xml"
    assert result["truncated"] is False


async def test_raw_past_max_bytes_keeps_head_and_tail(site: Site, tmp_path: Path) -> None:
    serve(site, "/log", "FIRST-LINE\n" + "middle line\n" * 50_000 + "LAST-LINE\n", "text/plain")
    result = await scrape(make_ctx(tmp_path), mode="raw", url=site.url("/log"), max_bytes=2_000)
    assert result["truncated"] is True
    assert result["content"].startswith("FIRST-LINE")
    assert result["content"].endswith("LAST-LINE\n")
    assert len(result["content"].encode()) <= 2_000


async def test_a_huge_deeply_nested_page_is_bounded(site: Site, tmp_path: Path) -> None:
    nested = "<html><body>" + "<div>" * 50_000 + "deep text" + "</div>" * 50_000 + "</body></html>"
    serve(site, "/deep", nested)
    result = await scrape(make_ctx(tmp_path), url=site.url("/deep"))
    assert result["truncated"] is False
    assert len(result["content"]) < 1000


async def test_markdown_of_a_non_html_page_returns_it_as_is(site: Site, tmp_path: Path) -> None:
    serve(site, "/notes.txt", "just text", "text/plain")
    result = await scrape(make_ctx(tmp_path), url=site.url("/notes.txt"))
    assert result["content"] == "just text"
    assert "not an HTML page (text/plain)" in result["note"]


async def test_the_guard_refuses_private_pages_and_redirects_to_them(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def away(request: web.Request) -> web.Response:
        raise web.HTTPFound("http://192.168.1.1/router")

    site.routes["/away"] = away
    with pytest.raises(ToolError, match=r"192\.168\.1\.1 is a private address"):
        await scrape(make_ctx(tmp_path), url=site.url("/away"))
    asked = stub_dns(monkeypatch, {"wiki.corp.test": ["172.16.4.4"]})
    with pytest.raises(ToolError, match=r"wiki\.corp\.test resolves to 172\.16\.4\.4, a private address"):
        await scrape(make_ctx(tmp_path, private=()), url="http://wiki.corp.test/")
    assert asked == ["wiki.corp.test"]


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        ({}, 'mode "markdown" needs url'),
        ({"mode": "raw", "query": "x"}, 'mode "raw" takes url, not query'),
        ({"mode": "search"}, 'mode "search" needs query'),
        ({"mode": "search", "query": "x", "url": "https://a.example"}, "search takes query, not url"),
        ({"url": "ftp://files.example/x"}, "absolute http:// or https:// URL"),
        ({"url": "/relative/path"}, "absolute http:// or https:// URL"),
    ],
)
async def test_bad_arguments_say_what_to_send(tmp_path: Path, args: dict[str, Any], phrase: str) -> None:
    with pytest.raises(ToolError, match=phrase):
        await scrape(make_ctx(tmp_path), **args)


@pytest.mark.parametrize("provider", ["searxng", "brave", "exa"])
async def test_search_through_each_backend(tmp_path: Path, provider: str) -> None:
    key = None if provider == "searxng" else "search-key-123"
    async with FakeSearch(provider, api_key=key) as fake:  # type: ignore[arg-type]
        ctx = make_ctx(tmp_path, private=(), search={"provider": provider, "url": fake.url, "api_key": key})
        result = await scrape(ctx, mode="search", query="tide   mills")
    assert result["provider"] == provider
    assert result["query"] == "tide mills"
    assert [r["url"] for r in result["results"]] == [
        f"https://results.example/tide-mills/{i}" for i in range(1, RESULTS + 1)
    ]
    assert result["results"][0]["title"] == "tide mills: result 1"
    assert result["results"][0]["snippet"] == "All about tide mills, part 1."
    seen = fake.requests[0]
    if provider == "exa":
        assert seen.body is not None and seen.body["query"] == "tide mills"
    else:
        assert seen.query["q"] == "tide mills"


async def test_a_wrong_search_key_is_reported_without_the_key(tmp_path: Path) -> None:
    async with FakeSearch("brave", api_key="right") as fake:
        ctx = make_ctx(
            tmp_path, private=(), search={"provider": "brave", "url": fake.url, "api_key": "wrong-key"}
        )
        with pytest.raises(ToolError, match=r"refused the request \(HTTP 401\); ask the operator") as caught:
            await scrape(ctx, mode="search", query="mills")
    assert "wrong-key" not in str(caught.value)


async def test_search_without_a_backend_says_so(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="web search is not configured"):
        await scrape(make_ctx(tmp_path), mode="search", query="mills")


async def test_the_search_backend_cannot_redirect_elsewhere(site: Site, tmp_path: Path) -> None:
    async def search(request: web.Request) -> web.Response:
        raise web.HTTPFound("http://10.9.9.9/search")

    site.routes["/search"] = search
    ctx = make_ctx(tmp_path, private=(), search={"provider": "searxng", "url": site.url("/")})
    with pytest.raises(ToolError, match=r"10\.9\.9\.9 is not in the allowed domains \(127\.0\.0\.1\)"):
        await scrape(ctx, mode="search", query="mills")
    assert site.hits == ["/search?q=mills&format=json"]
