"""Markdown -> sanitized HTML for the web chat page.

Two layers, so that a bug in one is not enough: markdown-it-py renders with raw HTML off
(``<script>`` in a reply is shown as text) and refuses ``javascript:``/``vbscript:``/``data:``
links; then nh3 (the ammonia sanitizer) keeps only an allowlist of tags and attributes and
only ``http``, ``https`` and ``mailto`` URLs. Images are shown as links: a picture in a reply
would make every visitor's browser fetch an address the model chose.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token

from connectors.base import RenderedChunk

__all__ = ["ALLOWED_TAGS", "render_chunks", "to_html"]

ALLOWED_TAGS = {
    "p", "br", "hr", "strong", "em", "s", "del", "code", "pre", "blockquote",
    "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "a",
    "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "ol": {"start"}}
_SCHEMES = {"http", "https", "mailto"}


def _image_as_link(renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = "".join(child.content for child in token.children or []) or src
    return f'<a href="{escapeHtml(src)}">{escapeHtml(alt)}</a>'


@cache
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])
    md.add_render_rule("image", _image_as_link)
    return md


def to_html(markdown: str) -> str:
    """One Markdown text as sanitized HTML."""
    rendered = _parser().render(markdown)
    return nh3.clean(
        rendered,
        tags=ALLOWED_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes=_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
    )


def render_chunks(markdown: str) -> list[RenderedChunk]:
    """A reply as HTML chunks with plain twins; a reply past the console's limit is cut where
    the Markdown renderer cuts it (code blocks closed and reopened), then each part rendered."""
    from connectors.render import LIMITS, plain_text, render_markdown

    if not markdown.strip():
        return []
    if len(markdown) <= LIMITS["console"]:
        return [RenderedChunk(to_html(markdown), plain_text(markdown), "html")]
    return [
        RenderedChunk(to_html(part.text), part.plain, "html") for part in render_markdown(markdown, "console")
    ]
