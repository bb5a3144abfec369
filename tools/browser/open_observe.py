"""``browser_open`` and ``browser_observe`` (``browser.use``): load a page, and look at it again."""

from __future__ import annotations

from typing import Any

from yarl import URL

from gateway.runtime.model import ToolResult
from tools.base import HostTool, ToolContext, ToolError
from tools.browser.chromium import browser_available
from tools.browser.common import (
    DEFAULT_NAV_TIMEOUT_MS,
    SCREENSHOT_PROPERTY,
    TIMEOUT_PROPERTY,
    current_session,
    manager,
    navigate,
    observation_result,
    open_session,
)
from tools.browser.observe import DEFAULT_ELEMENTS, MAX_ELEMENTS
from tools.egress import egress_policy, vetted_addresses

__all__ = ["OBSERVE", "OPEN"]

MAX_URL_CHARS = 8_000
WAIT_STATES = ("load", "domcontentloaded", "networkidle")


async def _vet(ctx: ToolContext, raw: str) -> str:
    """The url, if it is http(s) and the guard lets the persona reach its host."""
    try:
        url = URL(raw.strip())
    except ValueError as exc:
        raise ToolError(f"url {raw[:200]!r} is not a valid URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.raw_host:
        raise ToolError(
            f"url must be an absolute http(s) URL such as https://example.com/; got {raw[:200]!r}"
        )
    if url.raw_user is not None or url.raw_password is not None:
        raise ToolError("credentials in the URL are not allowed; sign in through the page instead")
    port = url.port or (443 if url.scheme == "https" else 80)
    await vetted_addresses(url.raw_host, port, egress_policy(ctx), resolve=manager(ctx).resolve)
    return str(url)


async def _open(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    url = await _vet(ctx, args["url"])
    wait_for = args.get("wait_for") or "load"
    timeout_ms = args.get("timeout_ms") or DEFAULT_NAV_TIMEOUT_MS
    session = await open_session(ctx)
    async with session.lock:
        await manager(ctx).new_page(session)
        outcome = await navigate(session, url, wait_for, timeout_ms)
        result = await observation_result(
            session, extra=outcome, with_screenshot=bool(args.get("screenshot"))
        )
        session.touch()
        return result


async def _observe(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    session = await current_session(ctx)
    async with session.lock:
        result = await observation_result(
            session,
            with_screenshot=bool(args.get("screenshot")),
            max_elements=args.get("max_elements") or DEFAULT_ELEMENTS,
            include_hidden=bool(args.get("include_hidden")),
        )
        session.touch()
        return result


_CONFINEMENT = (
    " Runs in a headless Chromium on the Talon host, one session (cookies, tab) per thread, closed "
    "after browser.idle_timeout_seconds unused; every request the page makes passes the net_http "
    "egress guard (allowed domains; no private, loopback or metadata addresses unless the operator "
    "allows them), and refused requests are listed under blocked. Downloads land in /workspace/downloads."
)

OPEN = HostTool(
    mcp_name="browser_open",
    internal_name="browser.open",
    prefix="browser.use",
    description=(
        "Open a URL in this thread's browser tab and return an observation of the page: url, title, "
        "visible text and the actionable elements with el_ ids for browser_act." + _CONFINEMENT
    ),
    input_schema={
        "type": "object",
        "properties": {
            "url": {"type": "string", "maxLength": MAX_URL_CHARS, "description": "Absolute http(s) URL."},
            "wait_for": {
                "type": "string",
                "enum": list(WAIT_STATES),
                "description": "When navigation is complete: load, domcontentloaded or networkidle. Default load.",
            },
            "screenshot": SCREENSHOT_PROPERTY,
            "timeout_ms": {
                **TIMEOUT_PROPERTY,
                "description": "Navigation timeout in ms. Default 30000, max 120000.",
            },
        },
        "required": ["url"],
        "additionalProperties": False,
    },
    handler=_open,
    timeout=180.0,
    available=browser_available,
)

OBSERVE = HostTool(
    mcp_name="browser_observe",
    internal_name="browser.observe",
    prefix="browser.use",
    description=(
        "Refresh the observation of the current page (after it changed or loaded more). Element ids "
        "are valid for the most recent observation; always use ids from the latest call."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "screenshot": SCREENSHOT_PROPERTY,
            "include_hidden": {"type": "boolean", "description": "Include hidden elements. Default false."},
            "max_elements": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_ELEMENTS,
                "description": f"Cap on the elements listed (default {DEFAULT_ELEMENTS}, max {MAX_ELEMENTS}).",
            },
        },
        "additionalProperties": False,
    },
    handler=_observe,
    timeout=60.0,
    available=browser_available,
)
