"""Markdown replies -> each platform's native format, in chunks within its limits.

>>> chunks = render_markdown("**Hi** <you>", "telegram")
>>> chunks[0].text, chunks[0].plain
('<b>Hi</b> &lt;you&gt;', 'Hi <you>')

The reply is parsed once (pulldown-cmark: CommonMark, tables, strikethrough; :mod:`.syntax`)
into a small tree (:mod:`.ir`), the tree is cut to the platform's limit (:mod:`.chunk`,
:mod:`.split`), and each chunk is rendered (:mod:`.telegram`, :mod:`.slack`,
:mod:`.markdown`) with its plain-text twin (:mod:`.plain`).

Limits are counted in UTF-16 code units for every platform (:func:`utf16_len`): that is
how Telegram counts, and it is never less than a character count, so a chunk fits
however a platform counts. For Telegram the HTML source itself is kept within the limit.

Chunk twins: ``"".join(c.plain for c in chunks) == plain_text(markdown)``; each twin
ends with the whitespace that separated it from the next chunk.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Literal, get_args

from connectors.base import RenderedChunk
from connectors.render.base import Renderer
from connectors.render.chunk import chunk_document
from connectors.render.ir import Document, Paragraph
from connectors.render.markdown import CONSOLE, CONSOLE_LIMIT, DISCORD, DISCORD_LIMIT
from connectors.render.parse import parse, text_inlines
from connectors.render.plain import plain_blocks, plain_document
from connectors.render.slack import SLACK, SLACK_LIMIT
from connectors.render.telegram import TELEGRAM, TELEGRAM_LIMIT
from connectors.render.text import utf16_len

__all__ = [
    "CONSOLE_LIMIT",
    "DISCORD_LIMIT",
    "LIMITS",
    "SLACK_LIMIT",
    "TELEGRAM_LIMIT",
    "Platform",
    "parse",
    "plain_text",
    "render_document",
    "render_markdown",
    "render_platforms",
    "utf16_len",
]

log = logging.getLogger("talon.render")

Platform = Literal["telegram", "slack", "discord", "console"]
PLATFORMS: tuple[Platform, ...] = get_args(Platform)

LIMITS: dict[Platform, int] = {
    "telegram": TELEGRAM_LIMIT,
    "slack": SLACK_LIMIT,
    "discord": DISCORD_LIMIT,
    "console": CONSOLE_LIMIT,
}
_RENDERERS: dict[Platform, Renderer] = {
    "telegram": TELEGRAM,
    "slack": SLACK,
    "discord": DISCORD,
    "console": CONSOLE,
}


def render_markdown(markdown: str, platform: Platform) -> list[RenderedChunk]:
    """Render a Markdown reply for ``platform`` as chunks within its limit.

    Args:
        markdown (:obj:`str`): Any text; it is read as CommonMark with tables and
            strikethrough. Raw HTML in it is shown as text.
        platform (:obj:`str`): ``"telegram"`` (HTML), ``"slack"`` (mrkdwn), ``"discord"`` or
            ``"console"`` (Markdown).

    Returns:
        list[:class:`connectors.base.RenderedChunk`]: In order; empty when the input has
        nothing to show. Never raises for any input text.

    Raises:
        ValueError: ``platform`` is not one of the four above.
    """
    renderer = _renderer(platform)
    if not markdown or not markdown.strip():
        return []
    try:
        return render_document(parse(markdown), platform)
    except Exception:  # a long-running sender must get something it can deliver
        log.exception("rendering failed; sending the reply as plain text")
        return _plain_fallback(markdown, renderer, LIMITS[platform])


def render_document(document: Document, platform: Platform, limit: int | None = None) -> list[RenderedChunk]:
    """Render an already parsed document for ``platform``; ``limit`` overrides the
    platform's (in UTF-16 code units)."""
    renderer = _renderer(platform)
    return chunk_document(document, renderer, LIMITS[platform] if limit is None else limit)


def render_platforms(
    markdown: str, platforms: Iterable[Platform] = PLATFORMS
) -> dict[Platform, list[RenderedChunk]]:
    """Parse once and render for several platforms (a cross-channel post, for instance).
    Like :func:`render_markdown`, never raises for any input text."""
    wanted = list(platforms)
    renderers = [_renderer(platform) for platform in wanted]
    if not markdown or not markdown.strip():
        return {platform: [] for platform in wanted}
    try:
        document = parse(markdown)
        plains = plain_blocks(document)  # every platform's chunk twins are slices of these
        return {
            platform: chunk_document(document, renderer, LIMITS[platform], plains=plains)
            for platform, renderer in zip(wanted, renderers, strict=True)
        }
    except Exception:
        log.exception("rendering failed; sending the reply as plain text")
        return {
            platform: _plain_fallback(markdown, renderer, LIMITS[platform])
            for platform, renderer in zip(wanted, renderers, strict=True)
        }


def plain_text(markdown: str) -> str:
    """The plain text of a whole reply: what the chunks' ``plain`` twins add up to."""
    if not markdown or not markdown.strip():
        return ""
    return plain_document(parse(markdown))


def _renderer(platform: str) -> Renderer:
    try:
        return _RENDERERS[platform]  # type: ignore[index]
    except KeyError:
        raise ValueError(f"unknown platform {platform!r}; expected one of {', '.join(PLATFORMS)}") from None


def _plain_fallback(markdown: str, renderer: Renderer, limit: int) -> list[RenderedChunk]:
    text = markdown.strip()
    try:
        return chunk_document(Document([Paragraph(text_inlines(text))]), renderer, limit)
    except Exception:
        log.exception("plain-text rendering failed too")
        step = max(1, limit // 8)  # escaping grows text at most 5x (&amp;)
        return [
            RenderedChunk(text[i : i + step], text[i : i + step], "plain") for i in range(0, len(text), step)
        ]
