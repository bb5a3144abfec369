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

from connectors.render.base import NO_STYLES, Renderer
from connectors.render.ir import Block, Break, Code, Document, Inline, Style, Styled, Text


class PlainRenderer(Renderer):
    """The base layout with no markup at all."""

    format = "plain"

    def inlines(
        self, nodes: Sequence[Inline], active: frozenset[Style] = NO_STYLES, in_link: bool = False
    ) -> str:
        return plain_inlines(nodes, in_link)


PLAIN = PlainRenderer()


def plain_inlines(nodes: Sequence[Inline], in_link: bool = False) -> str:
    """Plain text of inline nodes: what the base renderer's hooks give, walked directly
    (every reply's twin goes through here). A link inside a link shows no address."""
    if len(nodes) == 1 and type(nodes[0]) is Text:
        return nodes[0].text
    parts: list[str] = []
    for node in nodes:
        kind = type(node)
        if kind is Text or kind is Code:
            parts.append(node.text)  # type: ignore[union-attr]
        elif kind is Break:
            parts.append("\n")
        elif kind is Styled:
            parts.append(plain_inlines(node.children, in_link))  # type: ignore[union-attr]
        else:
            parts.append(plain_inlines(node.children, True))  # type: ignore[union-attr]
            if not in_link:
                parts.append(node.plain_suffix)  # type: ignore[union-attr]
    return "".join(parts)


def plain_block(block: Block) -> str:
    """Plain text of one top-level block."""
    return PLAIN.block(block)


def plain_blocks(document: Document) -> list[str]:
    """Plain text of each of a document's blocks."""
    return [PLAIN.block(block) for block in document.blocks]


def plain_document(document: Document) -> str:
    """Plain text of a whole document: its blocks' plain texts joined by ``"\\n\\n"``."""
    return PLAIN.block_joiner.join(plain_blocks(document))
