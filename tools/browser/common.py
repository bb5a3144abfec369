"""What the browser tools share: the caller's session, navigation, screenshots and the schema bits."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

from gateway.runtime.model import ToolResult
from gateway.workspaces import WORKSPACE
from tools.base import ToolContext, ToolError
from tools.browser.chromium import browser_problem
from tools.browser.manager import BrowserManager, manager_for
from tools.browser.observe import first_line, observe
from tools.browser.session import SCREENSHOTS, BrowserSession, SessionKey
from tools.egress import egress_policy
from tools.workspace.roots import Root, WorkspaceRoots
from tools.workspace.view_image import view_image

__all__ = [
    "DEFAULT_NAV_TIMEOUT_MS",
    "MAX_TIMEOUT_MS",
    "SCREENSHOT_PROPERTY",
    "TIMEOUT_PROPERTY",
    "current_session",
    "key_of",
    "manager",
    "navigate",
    "observation_result",
    "open_session",
    "screenshot",
    "settle",
]

DEFAULT_NAV_TIMEOUT_MS = 30_000
MAX_TIMEOUT_MS = 120_000
SCREENSHOT_PROPERTY: dict[str, Any] = {
    "type": "boolean",
    "description": "Also capture a PNG of the viewport (saved under /workspace/screenshots). Default false.",
}
TIMEOUT_PROPERTY: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_MS}


def key_of(ctx: ToolContext) -> SessionKey:
    return (ctx.persona.name, ctx.thread_id)


def manager(ctx: ToolContext) -> BrowserManager:
    problem = browser_problem(ctx.settings.browser)
    if problem is not None:
        raise ToolError(f"the browser is not available here: {problem}")
    return manager_for(ctx.settings)


async def current_session(ctx: ToolContext) -> BrowserSession:
    """The caller's open session, or an error telling the model to call browser_open."""
    return await manager(ctx).existing(key_of(ctx))


async def open_session(ctx: ToolContext) -> BrowserSession:
    return await manager(ctx).session(key_of(ctx), egress_policy(ctx))


async def navigate(session: BrowserSession, url: str, wait_for: str, timeout_ms: int) -> dict[str, Any]:
    """Load ``url`` in the session's tab; the navigation's outcome (status, or why it failed)."""
    page = session.require_page()
    try:
        response = await page.goto(url, wait_until=wait_for, timeout=timeout_ms)
    except Exception as exc:
        message = first_line(exc)
        if "Timeout" in message:
            return {"navigation": f"not {wait_for} within {timeout_ms} ms; the page may be incomplete"}
        # Chromium is still loading its error page into this tab, which would interrupt the
        # next navigation: the next browser_open gets a fresh tab.
        await page.close()
        blocked = [b for b in session.guard.blocked if b.kind == "document"]
        if blocked:
            raise ToolError(f"{url[:200]} was refused by the egress guard: {blocked[-1].reason}") from None
        raise ToolError(f"could not open {url[:200]}: {message}") from None
    return {"status": response.status if response is not None else None}


async def settle(page: Any, timeout_ms: int) -> None:
    """Give a page that an action set loading a moment to finish (bounded, errors ignored)."""
    try:
        await page.wait_for_load_state("load", timeout=min(timeout_ms, 5_000))
    except Exception:
        return


async def screenshot(
    session: BrowserSession, *, full_page: bool = False, locator: Any = None, timeout_ms: int = 30_000
) -> ToolResult:
    """A PNG of the viewport (or the whole page, or one element) saved in the thread's workspace.

    Returns the path, bytes, width and height, and the image itself within view_image's limits.
    """
    page = session.require_page()
    folder = session.workspace / SCREENSHOTS
    folder.mkdir(parents=True, exist_ok=True)
    name = f"shot-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}.png"
    try:
        async with asyncio.timeout(timeout_ms / 1000 + 5):
            if locator is not None:
                data = await locator.screenshot(type="png", timeout=timeout_ms)
            else:
                data = await page.screenshot(type="png", full_page=full_page, timeout=timeout_ms)
    except TimeoutError:
        raise ToolError(f"the screenshot was not taken within {timeout_ms} ms; try again") from None
    except ToolError:
        raise
    except Exception as exc:
        raise ToolError(f"could not take the screenshot: {first_line(exc)}") from None
    (folder / name).write_bytes(data)
    roots = WorkspaceRoots((Root(WORKSPACE, session.workspace.resolve(), False),), "read")
    viewed = await asyncio.to_thread(view_image, roots, f"{WORKSPACE}/{SCREENSHOTS}/{name}")
    meta = viewed.value
    shot = {"path": meta["path"], "bytes": meta["size"], "width": meta["width"], "height": meta["height"]}
    if meta.get("imageOmitted"):
        shot.update(imageOmitted=True, reason=meta["reason"])
    return ToolResult(shot, viewed.images)


async def observation_result(
    session: BrowserSession,
    *,
    extra: dict[str, Any] | None = None,
    with_screenshot: bool = False,
    max_elements: int | None = None,
    include_hidden: bool = False,
) -> ToolResult:
    """The observation of the session's page (with ``extra`` first), and a screenshot if asked."""
    kwargs: dict[str, Any] = {"include_hidden": include_hidden}
    if max_elements is not None:
        kwargs["max_elements"] = max_elements
    found = await observe(session, **kwargs)
    value: dict[str, Any] = {**(extra or {}), **found}
    images: tuple[Any, ...] = ()
    if with_screenshot:
        shot = await screenshot(session)
        value["screenshot"] = shot.value
        images = shot.images
    return ToolResult(value, images)
