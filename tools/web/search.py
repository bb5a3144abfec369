"""``web_scrape``'s search mode: one query to the backend configured as ``web_search`` in talon.yaml.

Three wire formats: SearXNG's JSON API (``GET /search?format=json``), Brave's web search API
(``GET /res/v1/web/search`` with ``X-Subscription-Token``) and Exa's (``POST /search`` with
``x-api-key``). Each comes back as the same ranked list of ``title``, ``url`` and ``snippet``.

The backend's address is trusted because the operator wrote it: the request goes through the
egress guard with a policy that allows exactly the backend's host, private addresses included
(a SearXNG on the LAN), and nothing else, so a redirect cannot take it anywhere. The persona's
allowlist does not apply; the ``web.search`` label is what lets a persona search.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from typing import Any

import aiohttp
from yarl import URL

from gateway import jsonsafe
from gateway.web_settings import SEARCH_DEFAULT_URLS, WebSearchSettings
from tools.base import ToolError
from tools.egress import Request, describe_failure, exchange
from tools.ssrf import EgressPolicy
from tools.web.body import read_body
from tools.web.retry import with_retries

__all__ = ["MAX_QUERY_CHARS", "search"]

MAX_QUERY_CHARS = 400
_MAX_RESPONSE_BYTES = 2_000_000
_TITLE_CHARS = 300
_SNIPPET_CHARS = 500
_URL_CHARS = 2_000
_TAG = re.compile(r"<[^>]{0,200}>")  # Brave marks matches with <strong>


def _endpoint(settings: WebSearchSettings) -> URL:
    root = settings.url or SEARCH_DEFAULT_URLS[settings.provider or ""]
    return URL(root.rstrip("/") + "/")


def _request(settings: WebSearchSettings, query: str, timeout: float) -> Request:
    root = _endpoint(settings)
    count = settings.max_results
    key = settings.api_key or ""
    if settings.provider == "searxng":
        url = root.join(URL("search")).with_query(q=query, format="json")
        return Request("GET", url, {"Accept": "application/json"}, None, timeout)
    if settings.provider == "brave":
        url = root.join(URL("res/v1/web/search")).with_query(q=query, count=count)
        return Request("GET", url, {"Accept": "application/json", "X-Subscription-Token": key}, None, timeout)
    body = json.dumps({"query": query, "numResults": count, "contents": {"highlights": True}}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json", "x-api-key": key}
    return Request("POST", root.join(URL("search")), headers, body, timeout)


def _policy(url: URL) -> EgressPolicy:
    host = url.raw_host or ""
    return EgressPolicy.build([host], [host])


async def search(settings: WebSearchSettings, query: str, timeout: float) -> dict[str, Any]:
    """Ask the configured backend; the ranked results, each with ``title``, ``url`` and ``snippet``.

    Raises:
        :class:`tools.base.ToolError`: Search is not configured, or the backend failed or refused.
    """
    if settings.provider is None:
        raise ToolError(
            "web search is not configured; the operator sets web_search (provider searxng, brave or exa) "
            "in talon.yaml. Read a known URL with mode markdown instead"
        )
    req = _request(settings, query, timeout)
    policy = _policy(req.url)

    async def consume(resp: aiohttp.ClientResponse) -> tuple[int, bytes, bool]:
        body = await read_body(resp, _MAX_RESPONSE_BYTES)
        return resp.status, body.data, body.whole

    try:
        (status, data, whole), _ = await with_retries(req.method, lambda: exchange(req, policy, consume))
    except aiohttp.ClientError as exc:
        raise ToolError(f"the search backend ({settings.provider}) failed: {describe_failure(exc)}") from None
    if status in (401, 403):
        raise ToolError(
            f"the search backend ({settings.provider}) refused the request (HTTP {status}); "
            "ask the operator to check web_search.api_key"
        )
    if status == 429:
        raise ToolError(
            f"the search backend ({settings.provider}) is rate-limiting (HTTP 429); try again later"
        )
    if status != 200 or not whole:
        raise ToolError(f"the search backend ({settings.provider}) answered HTTP {status}; try again later")
    try:
        payload = jsonsafe.loads(data, max_bytes=_MAX_RESPONSE_BYTES)
    except jsonsafe.JSONInputError:
        raise ToolError(f"the search backend ({settings.provider}) sent something that is not JSON") from None
    results = _results(settings.provider, payload)[: settings.max_results]
    return {"mode": "search", "query": query, "provider": settings.provider, "results": results}


def _results(provider: str, payload: Any) -> list[dict[str, Any]]:
    if not isinstance(payload, Mapping):
        return []
    if provider == "searxng":
        items, snippet = payload.get("results"), ("content",)
    elif provider == "brave":
        web = payload.get("web")
        items, snippet = (web.get("results") if isinstance(web, Mapping) else None), ("description",)
    else:
        items, snippet = payload.get("results"), ("highlights", "text", "summary")
    out: list[dict[str, Any]] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, Mapping) or not isinstance(item.get("url"), str):
            continue
        entry = {
            "title": _text(item.get("title"), _TITLE_CHARS),
            "url": item["url"][:_URL_CHARS],
            "snippet": _text(next((item[k] for k in snippet if item.get(k)), ""), _SNIPPET_CHARS),
        }
        published = item.get("publishedDate") or item.get("page_age") or item.get("age")
        if isinstance(published, str) and published:
            entry["published"] = published[:40]
        out.append(entry)
    return out


def _text(value: Any, limit: int) -> str:
    if isinstance(value, list):
        value = " … ".join(v for v in value if isinstance(v, str))
    if not isinstance(value, str):
        return ""
    text = " ".join(html.unescape(_TAG.sub("", value)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
