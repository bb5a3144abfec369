"""``browser_act`` (``browser.use``): click, fill, press, select, hover, scroll to or wait for an element."""

from __future__ import annotations

from typing import Any

from gateway.runtime.model import ToolResult
from tools.base import HostTool, ToolContext, ToolError
from tools.browser.chromium import browser_available
from tools.browser.common import (
    SCREENSHOT_PROPERTY,
    TIMEOUT_PROPERTY,
    current_session,
    observation_result,
    settle,
)
from tools.browser.observe import first_line
from tools.browser.targets import TARGET_SCHEMA, locate

__all__ = ["ACT"]

ACTIONS = ("click", "fill", "press", "select", "hover", "scroll_to", "wait_for")
DEFAULT_TIMEOUT_MS = 10_000
MAX_VALUE_CHARS = 100_000
_NEEDS_VALUE = {
    "fill": "the text to put in the field",
    "press": "a key or combination such as Enter, Tab or Control+A",
    "select": "the value or label of the option",
}


async def _perform(locator: Any, action: str, value: str | None, timeout: int) -> None:
    if action == "click":
        await locator.click(timeout=timeout)
    elif action == "fill":
        await locator.fill(value, timeout=timeout)
    elif action == "press":
        await locator.press(value, timeout=timeout)
    elif action == "select":
        await locator.select_option(value, timeout=timeout)
    elif action == "hover":
        await locator.hover(timeout=timeout)
    elif action == "scroll_to":
        await locator.scroll_into_view_if_needed(timeout=timeout)
    else:
        await locator.wait_for(state="visible", timeout=timeout)


async def _act(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    action = args["action"]
    value = args.get("value")
    if action in _NEEDS_VALUE and (not isinstance(value, str) or (action != "fill" and not value)):
        raise ToolError(f"{action} needs value: {_NEEDS_VALUE[action]}")
    timeout = args.get("timeout_ms") or DEFAULT_TIMEOUT_MS
    session = await current_session(ctx)
    async with session.lock:
        locator, shown = await locate(session, args["target"])
        try:
            await _perform(locator, action, value, timeout)
        except Exception as exc:
            message = first_line(exc)
            hint = (
                "the element may be hidden, disabled or covered; call browser_observe and try another target"
                if "Timeout" in message
                else "check the target and value"
            )
            raise ToolError(f"{action} on {shown} failed: {message}; {hint}") from None
        page = session.require_page()
        await settle(page, timeout)
        result = await observation_result(
            session, extra={"done": f"{action} on {shown}"}, with_screenshot=bool(args.get("screenshot"))
        )
        session.touch()
        return result


ACT = HostTool(
    mcp_name="browser_act",
    internal_name="browser.act",
    prefix="browser.use",
    description=(
        "Act on an element of the current page: click, fill, press, select, hover, scroll_to or wait_for. "
        'Prefer semantic targets ({"kind": "semantic", "text": "Sign in", "role": "button"}) over '
        "selectors. Returns the page's observation after the action."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS)},
            "target": TARGET_SCHEMA,
            "value": {
                "type": "string",
                "maxLength": MAX_VALUE_CHARS,
                "description": "Text for fill, key combination for press, option value or label for select.",
            },
            "timeout_ms": {**TIMEOUT_PROPERTY, "description": "Per-action timeout in ms. Default 10000."},
            "screenshot": SCREENSHOT_PROPERTY,
        },
        "required": ["action", "target"],
        "additionalProperties": False,
    },
    handler=_act,
    timeout=150.0,
    available=browser_available,
)
