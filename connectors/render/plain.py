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
from connectors.render.ir import (
    Block,
    Break,
    Code,
    CodeBlock,
    Document,
    Heading,
    Inline,
    Paragraph,
    Styled,
    Text,
)


class PlainRenderer(Renderer):
    """The base layout with no markup at all."""

    format = "plain"

    def render_block(self, block: Block, list_depth: int, quote_depth: int) -> str:
        # Every block of every reply comes through here: the leaves skip the hooks.
        if isinstance(block, (Paragraph, Heading)):
            return plain_inlines(block.children)
        if isinstance(block, CodeBlock):
            return block.code
        return super().render_block(block, list_depth, quote_depth)


PLAIN = PlainRenderer()


def plain_inlines(nodes: Sequence[Inline], in_link: bool = False) -> str:
    """Plain text of inline nodes: what the base renderer's hooks give, walked directly
    (every reply's twin goes through here). A link inside a link shows no address."""
    if len(nodes) == 1 and type(nodes[0]) is Text:
        return nodes[0].text
    parts: list[str] = []
    append = parts.append
    for node in nodes:  # isinstance rather than match: a class pattern costs more here
        if isinstance(node, (Text, Code)):
            append(node.text)
        elif isinstance(node, Styled):
            append(plain_inlines(node.children, in_link))
        elif isinstance(node, Break):
            append("\n")
        else:
            append(plain_inlines(node.children, True))
            if not in_link:
                append(node.plain_suffix)
    return "".join(parts)


def plain_block(block: Block) -> str:
    """Plain text of one top-level block."""
    return PLAIN.block(block)


def plain_blocks(document: Document) -> list[str]:
    """Plain text of each of a document's blocks."""
    render = PLAIN.render_block
    return [render(block, 0, 0) for block in document.blocks]


def plain_document(document: Document) -> str:
    """Plain text of a whole document: its blocks' plain texts joined by ``"\\n\\n"``."""
    return PLAIN.block_joiner.join(plain_blocks(document))
