"""The seam between ``web_scrape`` and a browser: a page's HTML after its scripts have run.

``web_scrape`` renders a page whose plain fetch extracts to almost nothing (a body built by
scripts) and extracts again. The rendering uses the thread's confined browser session
(:mod:`tools.browser`): every request the page makes passes the same egress guard, under the
same policy as the fetch. It happens in a tab of its own, closed afterwards, with the session's
lock held, so the tab the browser tools act on is left as it was. :func:`render_html` answers
``None`` when no Chromium is installed or the page cannot be rendered; ``web_scrape`` then
returns what the plain fetch gave, saying the page may need a browser.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from yarl import URL

from tools.browser.chromium import browser_problem
from tools.browser.common import open_session

if TYPE_CHECKING:
    from tools.base import ToolContext

__all__ = ["MAX_RENDERED_CHARS", "render_html"]

log = logging.getLogger(__name__)

# The most of a rendered document handed to extraction.
MAX_RENDERED_CHARS = 5_000_000
# After the load event, scripts get this long (at most) to finish fetching.
_SETTLE_MS = 3_000


async def render_html(ctx: ToolContext, url: str, timeout: float) -> str | None:
    """``url`` rendered in the thread's confined browser, or ``None`` when that is not possible."""
    if browser_problem(ctx.settings.browser) is not None:
        return None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        session = await open_session(ctx)
        async with session.lock:
            current = session.page
            page = await session.context.new_page()
            try:
                await page.goto(url, wait_until="load", timeout=max(deadline - loop.time(), 0.1) * 1000)
                settle = min(_SETTLE_MS, max(deadline - loop.time(), 0) * 1000)
                if settle > 0:
                    try:
                        await page.wait_for_load_state("networkidle", timeout=settle)
                    except Exception:  # still fetching: extract what is there
                        pass
                html = await page.content()
            finally:
                await page.close()
                session.page = current
                session.touch()
    except Exception as exc:  # the plain fetch's result stands; the note says to use the browser
        log.info("web_scrape could not render a page of %s: %s", URL(url).host, type(exc).__name__)
        return None
    return html[:MAX_RENDERED_CHARS]
