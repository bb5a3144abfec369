"""``browser_screenshot`` and ``browser_close`` (``browser.use``)."""

from __future__ import annotations

from typing import Any

from gateway.runtime.model import ToolResult
from tools.base import HostTool, ToolContext
from tools.browser.chromium import browser_available
from tools.browser.common import current_session, key_of, manager, screenshot
from tools.browser.targets import TARGET_SCHEMA, locate

__all__ = ["CLOSE", "SCREENSHOT"]


async def _screenshot(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    session = await current_session(ctx)
    async with session.lock:
        target = args.get("target")
        locator = (await locate(session, target))[0] if target is not None else None
        result = await screenshot(session, full_page=bool(args.get("full_page")), locator=locator)
        session.touch()
        return result


async def _close(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    closed = await manager(ctx).close_session(key_of(ctx))
    return {"closed": closed}


SCREENSHOT = HostTool(
    mcp_name="browser_screenshot",
    internal_name="browser.screenshot",
    prefix="browser.use",
    description=(
        "Capture a PNG of the current page's viewport (or one element, or the full page), saved under "
        "/workspace/screenshots; returns path, bytes, width and height, and the image where the model "
        "accepts images. Send it to the chat with channel_send's attachments."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "target": {**TARGET_SCHEMA, "description": "An element to capture instead of the viewport."},
            "full_page": {
                "type": "boolean",
                "description": "Capture the entire scrollable page. Default false; target wins if both are given.",
            },
        },
        "additionalProperties": False,
    },
    handler=_screenshot,
    timeout=60.0,
    available=browser_available,
)

CLOSE = HostTool(
    mcp_name="browser_close",
    internal_name="browser.close",
    prefix="browser.use",
    description=(
        "Close this thread's browser session, freeing its cookies and pages; the next browser_open "
        "starts a fresh one."
    ),
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    handler=_close,
    timeout=30.0,
    available=browser_available,
)
