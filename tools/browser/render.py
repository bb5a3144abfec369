"""Rendering a page for other tools (web_scrape's fallback for pages built by scripts).

:func:`render_html` loads a URL in a fresh context of the daemon's browser, behind the same
guard as the browser tools (routing and the pinned proxy, the persona's net_http policy), and
returns the page's HTML after it loaded; ``None`` when no browser is available here.
"""

from __future__ import annotations

import asyncio
import contextlib

from tools.base import ToolContext, ToolError
from tools.browser.chromium import browser_problem
from tools.browser.manager import manager_for
from tools.egress import egress_policy

__all__ = ["MAX_RENDER_CHARS", "render_html"]

MAX_RENDER_CHARS = 5_000_000
GUARD_PAGE = "talon egress guard: "  # how the pinned proxy words a refusal
_KEY_PERSONA = "\0render"  # render sessions never collide with a persona's own


async def render_html(ctx: ToolContext, url: str, *, timeout_ms: int = 30_000) -> str | None:
    """The HTML of ``url`` as Chromium rendered it, at most :data:`MAX_RENDER_CHARS` characters.

    Returns ``None`` when no Chromium is installed (the caller keeps what it has).

    Raises:
        :class:`tools.base.ToolError`: The guard refused the url, or the page did not load.
    """
    if browser_problem(ctx.settings.browser) is not None:
        return None
    manager = manager_for(ctx.settings)
    key = (f"{ctx.persona.name}{_KEY_PERSONA}", ctx.thread_id)
    session = await manager.session(key, egress_policy(ctx))
    try:
        page = await manager.new_page(session)
        try:
            async with asyncio.timeout(timeout_ms / 1000 + 5):
                response = await page.goto(url, wait_until="load", timeout=timeout_ms)
                html = await page.content()
                if response is not None and response.status == 403:
                    text = await page.inner_text("body")
                    if text.startswith(GUARD_PAGE):  # a redirect hop the pinned proxy refused
                        raise ToolError(
                            f"could not render {url[:200]}: {text.removeprefix(GUARD_PAGE)[:300]}"
                        )
        except ToolError:
            raise
        except TimeoutError:
            raise ToolError(f"{url[:200]} did not render within {timeout_ms} ms") from None
        except Exception as exc:
            blocked = session.guard.take_blocked()
            reason = blocked[0]["reason"] if blocked else str(exc).strip().splitlines()[0][:300]
            raise ToolError(f"could not render {url[:200]}: {reason}") from None
        return html[:MAX_RENDER_CHARS]
    finally:
        with contextlib.suppress(Exception):
            await manager.close_session(key)
