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

A reply is never lost to rendering: when text that is not blank shows nothing as Markdown
(an empty code fence, only link definitions) or rendering fails, it is sent as written, as
plain text cut to the platform's limit, and a warning is logged.

Rendering takes time in proportion to the reply: a millisecond or two for an ordinary
answer, seconds for a megabyte of dense Markdown. :func:`render_chunks` renders a reply
longer than :data:`OFF_LOOP_CHARS` in a worker thread, so that the event loop goes on
serving other chats meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Literal, TypeGuard, get_args

from connectors.base import RenderedChunk
from connectors.render.base import Renderer
from connectors.render.chunk import chunk_document
from connectors.render.ir import Document, Paragraph
from connectors.render.markdown import CONSOLE, CONSOLE_LIMIT, DISCORD, DISCORD_LIMIT
from connectors.render.parse import parse, text_inlines
from connectors.render.plain import plain_blocks, plain_document
from connectors.render.slack import SLACK, SLACK_LIMIT
from connectors.render.syntax import normalize, without_surrogates
from connectors.render.telegram import TELEGRAM, TELEGRAM_LIMIT
from connectors.render.text import utf16_len

__all__ = [
    "CONSOLE_LIMIT",
    "DISCORD_LIMIT",
    "LIMITS",
    "OFF_LOOP_CHARS",
    "SLACK_LIMIT",
    "TELEGRAM_LIMIT",
    "Platform",
    "parse",
    "plain_text",
    "render_chunks",
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
OFF_LOOP_CHARS = 8 * 1024
"""Replies longer than this (in characters) are rendered in a worker thread by
:func:`render_chunks`. The densest Markdown renders at about 6 microseconds a character,
so a shorter reply holds the event loop for 50 ms at worst (an ordinary one for a
millisecond or two)."""

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
        list[:class:`connectors.base.RenderedChunk`]: In order; empty only when the input is
        blank. Text that shows nothing as Markdown is sent as written. Never raises for any
        input text.

    Raises:
        ValueError: ``platform`` is not one of the four above.
    """
    return render_platforms(markdown, (platform,))[platform]


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
        rendered = {
            platform: chunk_document(document, renderer, LIMITS[platform], plains=plains)
            for platform, renderer in zip(wanted, renderers, strict=True)
        }
    except Exception:  # a long-running sender must get something it can deliver
        log.exception(
            "rendering failed; the reply is sent as plain text", extra={"reply_chars": len(markdown)}
        )
        rendered = {platform: [] for platform in wanted}
    else:
        if all(rendered.values()):
            return rendered
        log.warning(
            "a reply of %d characters shows nothing as Markdown; it is sent as written",
            len(markdown),
            extra={"reply_chars": len(markdown)},
        )
    return {
        platform: rendered[platform] or _plain_fallback(markdown, renderer, LIMITS[platform])
        for platform, renderer in zip(wanted, renderers, strict=True)
    }


async def render_chunks(render: Callable[[str], list[RenderedChunk]], markdown: str) -> list[RenderedChunk]:
    """``render(markdown)``, a connector's :meth:`~connectors.base.Connector.render`, run in
    a worker thread when ``markdown`` is longer than :data:`OFF_LOOP_CHARS`."""
    if len(markdown) <= OFF_LOOP_CHARS:
        return render(markdown)
    return await asyncio.to_thread(render, markdown)


def plain_text(markdown: str) -> str:
    """The plain text of a whole reply: what the chunks' ``plain`` twins add up to."""
    if not markdown or not markdown.strip():
        return ""
    try:
        document = parse(markdown)
    except Exception:
        document = Document([])
    return plain_document(document) if document.blocks else _as_written(markdown)


def _renderer(platform: str) -> Renderer:
    """The renderer of ``platform``, a name callers may pass unchecked."""
    if not _is_platform(platform):
        raise ValueError(f"unknown platform {platform!r}; expected one of {', '.join(PLATFORMS)}")
    return _RENDERERS[platform]


def _is_platform(name: str) -> TypeGuard[Platform]:
    return name in _RENDERERS


def _as_written(markdown: str) -> str:
    """The reply's text as sent when it is not rendered: line endings, NUL and lone
    surrogates made sendable as for the parser, blank space around it dropped."""
    return without_surrogates(normalize(markdown)).strip()


def _plain_fallback(markdown: str, renderer: Renderer, limit: int) -> list[RenderedChunk]:
    """The reply as written, as text (escaped for the platform's format) cut to ``limit``."""
    text = _as_written(markdown)
    try:
        return chunk_document(Document([Paragraph(text_inlines(text))]), renderer, limit)
    except Exception:
        log.exception("plain-text rendering failed too", extra={"reply_chars": len(markdown)})
        step = max(1, limit // 8)  # escaping grows text at most 5x (&amp;)
        return [
            RenderedChunk(text[i : i + step], text[i : i + step], "plain") for i in range(0, len(text), step)
        ]
