"""The plain-text twin: the text a reader sees, without markup.

It is laid out like the Telegram rendering (bullets, numbers, indentation, tables as
aligned text), with two differences: a link shows its address after the label,
``label (https://…)``, unless the label already is the address; and nothing is escaped.

The plain text of a document is its blocks' plain texts joined by a blank line. The
chunker keeps each chunk's twin an exact slice of that text, so joining the chunks'
twins with nothing in between gives the whole document's plain text back.
"""

from __future__ import annotations

from collections.abc import Sequence

from connectors.render.base import Renderer
from connectors.render.ir import Block, Document, Inline


class PlainRenderer(Renderer):
    """The base layout with no markup at all."""

    format = "plain"


PLAIN = PlainRenderer()


def plain_inlines(nodes: Sequence[Inline]) -> str:
    """Plain text of inline nodes."""
    return PLAIN.inlines(nodes)


def plain_block(block: Block) -> str:
    """Plain text of one top-level block."""
    return PLAIN.block(block)


def plain_document(document: Document) -> str:
    """Plain text of a whole document: its blocks' plain texts joined by ``"\\n\\n"``."""
    return PLAIN.block_joiner.join(PLAIN.block(block) for block in document.blocks)
