"""The seam between ``web_scrape`` and a browser: a page's HTML after its scripts have run.

``web_scrape`` renders a page whose plain fetch extracts to almost nothing (a body built by
scripts) and extracts again. Which browser does the rendering is decided here, in one place;
:func:`render_html` answers ``None`` when no browser is available, and ``web_scrape`` then
returns what the plain fetch gave, saying the page may need a browser.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.base import ToolContext

__all__ = ["Renderer", "render_html"]

# (ctx, url, timeout seconds) -> the rendered document's HTML, or None without a browser.
Renderer = Callable[["ToolContext", str, float], Awaitable[str | None]]


async def render_html(ctx: ToolContext, url: str, timeout: float) -> str | None:
    """``url`` rendered in the persona's confined browser, or ``None`` when none is available.

    No browser is wired to web_scrape yet, so this is always ``None``.
    """
    return None
