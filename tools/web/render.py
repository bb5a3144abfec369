"""The seam between ``web_scrape`` and a browser: a page's HTML after its scripts have run.

``web_scrape`` renders a page whose plain fetch extracts to almost nothing (a body built by
scripts) and extracts again. The rendering is :func:`tools.browser.render.render_html`: a fresh
context of the daemon's confined Chromium, closed afterwards, every request the page makes
through the same egress guard under the persona's net_http policy. This seam answers ``None``
when no Chromium is installed or the page could not be rendered; ``web_scrape`` then returns
what the plain fetch gave, saying the page may need the browser tools.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from yarl import URL

from tools.base import ToolError
from tools.browser import render as browser_render

if TYPE_CHECKING:
    from tools.base import ToolContext

__all__ = ["render_html"]

log = logging.getLogger(__name__)


async def render_html(ctx: ToolContext, url: str, timeout: float) -> str | None:
    """``url`` rendered in the daemon's confined browser, or ``None`` when that is not possible."""
    try:
        return await browser_render.render_html(ctx, url, timeout_ms=max(int(timeout * 1000), 1))
    except ToolError as exc:  # the plain fetch's result stands; its note says to use the browser
        log.info("web_scrape could not render a page of %s: %s", URL(url).host, str(exc)[:200])
        return None
