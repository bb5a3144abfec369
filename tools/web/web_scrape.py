"""``web_scrape``: read a web page as Markdown or as its raw body, or search the web.

``markdown`` and ``raw`` fetch through the egress guard under ``net.http:egress`` (the persona's
allowlist applies); ``search`` asks the backend configured as ``web_search`` in talon.yaml and
needs ``web.search`` instead (the tool's ``prefix_by_arg``: gateway.labels decides).

A page whose extraction is thin (a body its scripts build) is rendered through
:mod:`tools.web.render` and extracted again. When less than half of a long page's visible text
survived extraction, the result carries the reference's advisory. Output past ``max_bytes``
becomes a head-and-tail view.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from yarl import URL

from tools.base import HostTool, ToolContext, ToolError
from tools.egress import Request, decode_body, describe_failure, egress_policy, exchange
from tools.web import render
from tools.web.body import Body, cap_text, head_tail_text, read_body
from tools.web.extract import Extraction, extract_page
from tools.web.retry import with_retries
from tools.web.search import MAX_QUERY_CHARS, search

__all__ = ["ADVISORY", "PAGE_BYTES", "TOOL", "web_scrape"]

MODES = ("markdown", "raw", "search")
DEFAULT_TIMEOUT_MS = 30_000
MAX_TIMEOUT_MS = 120_000
DEFAULT_MAX_BYTES = 100_000
MAX_BYTES = 1_000_000
# The most of a page read for extraction; the rest is not fetched.
PAGE_BYTES = 5_000_000
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_MARKER_ROOM = 300
_META_CHARSET = re.compile(rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]{1,40})""", re.I)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]{0,200}\?>")
_HINT = "ask for a narrower page, or raise max_bytes (at most 1000000)"
ADVISORY = (
    "Extraction advisory: this page has {visible:,} characters of visible text and the extraction "
    "kept {kept:,}. Collapsed, tabbed or accordion content may be missing. If an expected section is "
    'absent, request the URL once with mode: "raw" and inspect the HTML, or open it in the browser; '
    "a larger max_bytes does not bring back what extraction dropped."
)


@dataclass(frozen=True, slots=True)
class _Page:
    status: int
    url: str
    content_type: str
    charset: str | None
    body: Body


# ---------------------------------------------------------------- arguments


def _arguments(args: Mapping[str, Any]) -> tuple[str, float, int]:
    mode = args.get("mode", "markdown")
    url, query = args.get("url"), args.get("query")
    if mode == "search":
        if url is not None:
            raise ToolError('search takes query, not url; to read a page use mode "markdown" with url')
        if not isinstance(query, str) or not query.strip():
            raise ToolError(
                'mode "search" needs query, e.g. {"mode": "search", "query": "tide mills brittany"}'
            )
    else:
        if query is not None:
            raise ToolError(f'mode "{mode}" takes url, not query; to search use mode "search" with query')
        if not isinstance(url, str) or not url.strip():
            raise ToolError(
                f'mode "{mode}" needs url, an absolute http(s) URL such as https://example.com/page'
            )
    timeout = float(args.get("timeout_ms", DEFAULT_TIMEOUT_MS)) / 1000
    return mode, timeout, int(args.get("max_bytes", DEFAULT_MAX_BYTES))


def _url(raw: str) -> URL:
    try:
        url = URL(raw.strip())
    except (ValueError, TypeError) as exc:
        raise ToolError(f"url is not a valid URL ({exc}); send an absolute https:// URL") from None
    if url.scheme not in ("http", "https") or not url.raw_host:
        raise ToolError("url must be an absolute http:// or https:// URL, e.g. https://example.com/page")
    return url


# ---------------------------------------------------------------- fetching


async def _fetch(ctx: ToolContext, url: URL, limit: int, timeout: float) -> _Page:
    req = Request("GET", url, {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}, None, timeout)
    policy = egress_policy(ctx)

    async def consume(resp: aiohttp.ClientResponse) -> _Page:
        body = await read_body(resp, limit)
        return _Page(resp.status, str(resp.url), resp.content_type.lower(), resp.charset, body)

    try:
        page, _ = await with_retries("GET", lambda: exchange(req, policy, consume))
    except aiohttp.ClientError as exc:
        raise ToolError(describe_failure(exc)) from None
    return page


def _html_text(data: bytes, charset: str | None) -> str:
    """The page as text: the header's charset, else its ``<meta charset>``, else UTF-8, else cp1252."""
    declared = charset
    if declared is None:
        found = _META_CHARSET.search(data[:4096])
        declared = found.group(1).decode("ascii") if found else None
    for codec in (declared, "utf-8"):
        if codec is None:
            continue
        try:
            return data.decode(codec)
        except (LookupError, UnicodeDecodeError):
            continue
    return data.decode("cp1252", errors="replace")


async def _extract(html: str, url: str) -> Extraction:
    return await asyncio.to_thread(extract_page, _XML_DECLARATION.sub("", html), url)


# ---------------------------------------------------------------- modes


async def _markdown(ctx: ToolContext, url: URL, timeout: float, max_bytes: int) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    page = await _fetch(ctx, url, PAGE_BYTES, timeout)
    if page.content_type not in _HTML_TYPES:
        result = _raw_result(page, max_bytes)
        result.update(mode="markdown", note=f"not an HTML page ({page.content_type}); returned as it came")
        return result
    html = _html_text(page.body.data, page.charset)
    found = await _extract(html, page.url)
    rendered = False
    if found.thin:
        html_after = await render.render_html(ctx, page.url, max(deadline - loop.time(), 1.0))
        if html_after:
            again = await _extract(html_after, page.url)
            if again.kept_chars > found.kept_chars:
                found, rendered = again, True
    content, truncated = cap_text(found.markdown, max(max_bytes - _MARKER_ROOM, 1), hint=_HINT)
    result: dict[str, Any] = {
        "mode": "markdown",
        "url": page.url,
        "status": page.status,
        "title": found.title,
        "content": content,
        "truncated": truncated,
        "bytes": page.body.total,
    }
    if rendered:
        result["rendered"] = True
    if found.lossy:
        result["advisory"] = ADVISORY.format(visible=found.visible_chars, kept=found.kept_chars)
    notes = []
    if found.thin:
        notes.append(
            "little main text was found; the page may build its content with scripts: open it with "
            'the browser tools or read it with mode "raw"'
        )
    if not page.body.whole:
        notes.append(f"the page is over {PAGE_BYTES:,} bytes; only part of it was read")
    if page.status >= 400:
        notes.append(f"the server answered HTTP {page.status}")
    if notes:
        result["note"] = "; ".join(notes)
    return result


def _raw_result(page: _Page, max_bytes: int) -> dict[str, Any]:
    body = page.body
    if body.whole:
        text = decode_body(body.data, page.content_type, page.charset, False)
        text = text if text is not None else body.data.decode("utf-8", errors="replace")
        content, truncated = cap_text(text, max_bytes, hint=_HINT)
    else:
        head = body.head.decode("utf-8", errors="replace")
        tail = body.tail.lstrip(bytes(range(0x80, 0xC0))).decode("utf-8", errors="replace")
        left_out = body.total - len(body.head) - len(body.tail)
        content = head_tail_text(head, tail, left_out, body.total, complete=body.complete, hint=_HINT)
        truncated = True
    return {
        "mode": "raw",
        "url": page.url,
        "status": page.status,
        "content_type": page.content_type,
        "content": content,
        "truncated": truncated,
        "bytes": body.total,
    }


async def web_scrape(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """Read a page (``markdown``, ``raw``) or search (``search``).

    Raises:
        :class:`tools.base.ToolError`: Bad arguments, a refusal of the guard, or a failure.
    """
    mode, timeout, max_bytes = _arguments(args)
    try:
        async with asyncio.timeout(timeout):
            if mode == "search":
                return await search(ctx.settings.web_search, " ".join(args["query"].split()), timeout)
            url = _url(args["url"])
            if mode == "raw":
                page = await _fetch(ctx, url, max(max_bytes - _MARKER_ROOM, 1), timeout)
                return _raw_result(page, max_bytes)
            return await _markdown(ctx, url, timeout, max_bytes)
    except TimeoutError:
        raise ToolError(
            f"no result within {timeout * 1000:g} ms; retry with a larger timeout_ms (at most {MAX_TIMEOUT_MS})"
        ) from None


TOOL = HostTool(
    mcp_name="web_scrape",
    internal_name="web.scrape",
    prefix="net.http",
    prefix_by_arg=("mode", {"search": "web.search"}),
    description=(
        "Read a web page or find a URL. markdown (default) extracts the page's main content (menus, "
        "banners and footers left out) as Markdown with its links; a page whose text its scripts "
        "build is rendered in a browser when one is available. raw returns the decoded response "
        "body without extraction, for JSON, RSS, text or inspecting HTML; it is not byte-preserving "
        "for binary data. search returns ranked results (title, url, snippet) for query, not url, "
        "through the search backend the operator configured (web_search in talon.yaml: SearXNG, "
        "Brave or Exa). When a page has at least 2,000 characters of visible text and extraction "
        "kept less than half, the result carries an advisory. Output over max_bytes is reduced to a "
        "head-and-tail view with a truncation marker. Only public addresses and the operator's "
        "allowed domains can be read."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "mode": {"type": "string", "enum": list(MODES), "default": "markdown"},
            "url": {
                "type": "string",
                "minLength": 1,
                "maxLength": 8192,
                "description": "Absolute http(s) URL. Required for markdown and raw.",
            },
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUERY_CHARS,
                "description": "Search query. Required for search.",
            },
            "timeout_ms": {
                "type": "number",
                "minimum": 1,
                "maximum": MAX_TIMEOUT_MS,
                "default": DEFAULT_TIMEOUT_MS,
                "description": f"Timeout in ms (at most {MAX_TIMEOUT_MS}).",
            },
            "max_bytes": {
                "type": "integer",
                "minimum": 1000,
                "maximum": MAX_BYTES,
                "default": DEFAULT_MAX_BYTES,
                "description": "Max UTF-8 bytes returned; past it a head-and-tail view.",
            },
        },
        "additionalProperties": False,
    },
    handler=web_scrape,
    timeout=MAX_TIMEOUT_MS / 1000 + 5,
)
