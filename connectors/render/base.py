"""The one walk over the representation; each platform gives its markup tables and hooks."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import get_args

from connectors.render.ir import (
    Block,
    Break,
    Code,
    CodeBlock,
    Heading,
    Inline,
    Link,
    ListBlock,
    Paragraph,
    Quote,
    Style,
    Styled,
    Table,
    Text,
)
from connectors.render.table import layout

NO_STYLES: frozenset[Style] = frozenset()
BOLD: frozenset[Style] = frozenset({"bold"})

_ALL_STYLES: tuple[Style, ...] = get_args(Style)
WITH_STYLE: dict[frozenset[Style], dict[Style, frozenset[Style]]] = {
    frozenset(subset): {style: frozenset({*subset, style}) for style in _ALL_STYLES}
    for size in range(len(_ALL_STYLES) + 1)
    for subset in combinations(_ALL_STYLES, size)
}
"""``WITH_STYLE[active][style]`` is ``active | {style}``, without building a set per span."""


class Renderer:
    """Renders blocks of the representation to one platform's markup.

    The structure (lists with markers and indentation, quotes, block separation) lives
    here, so the plain-text twin and every platform lay a document out the same way;
    subclasses only say how text, spans and blocks are marked up.

    Attributes:
        format (:obj:`str`): The :attr:`connectors.base.RenderedChunk.format` of the output.
        block_joiner (:obj:`str`): Between consecutive blocks.
        bullets (tuple[:obj:`str`, ...]): Bullet markers by nesting depth (cycled).
        opening (dict[:obj:`Style`, :obj:`str`]): The markup that opens a styled span.
        closing (dict[:obj:`Style`, :obj:`str`]): The markup that closes it.
    """

    format = "plain"
    block_joiner = "\n\n"
    bullets: tuple[str, ...] = ("• ", "◦ ", "▪ ")
    opening: dict[Style, str] = {style: "" for style in _ALL_STYLES}
    closing: dict[Style, str] = opening

    def block(self, block: Block) -> str:
        """Render one top-level block."""
        return self.render_block(block, 0, 0)

    def render_block(self, block: Block, list_depth: int, quote_depth: int) -> str:
        # isinstance, as in the inline walk: narrows like match, costs less per block
        if isinstance(block, Paragraph):
            return self.paragraph(self.inlines(block.children))
        if isinstance(block, Heading):
            return self.heading(block.level, block.children)
        if isinstance(block, CodeBlock):
            return self.code_block(block.code, block.lang)
        if isinstance(block, ListBlock):
            return self.list_block(block, list_depth, quote_depth)
        if isinstance(block, Quote):
            render, depth = self.render_block, quote_depth + 1
            inner = self.block_joiner.join([render(b, list_depth, depth) for b in block.blocks])
            return self.quote(inner, quote_depth)
        if isinstance(block, Table):
            return self.table(block)
        return self.rule()

    # Lists are laid out here for every platform: marker, then the item's blocks with
    # continuation lines indented to the marker's width.

    def list_block(self, block: ListBlock, depth: int, quote_depth: int) -> str:
        joiner = "\n" if block.tight else "\n\n"
        render = self.render_block
        inner = depth + 1
        ordered = block.ordered
        bullet = self.bullets[depth % len(self.bullets)]
        parts: list[str] = []
        for number, item in enumerate(block.items, block.start):
            blocks = item.blocks
            if len(blocks) == 1:  # the usual item: one paragraph
                body = render(blocks[0], inner, quote_depth)
            else:
                body = joiner.join([render(b, inner, quote_depth) for b in blocks])
            marker = f"{number}. " if ordered else bullet
            if "\n" in body:
                body = self.indent(body, " " * len(marker))
            if item.continued:
                parts.append(body)
            else:
                parts.append(marker + body if body else marker.rstrip())
        return joiner.join(parts)

    def indent(self, text: str, pad: str) -> str:
        """``text`` with the lines after its first indented by ``pad`` (blank lines stay empty)."""
        if "\n\n" in text or text.endswith("\n"):
            lines = text.split("\n")
            return lines[0] + "\n" + "\n".join([pad + line if line else line for line in lines[1:]])
        return text.replace("\n", "\n" + pad)  # no blank lines: every line after a break is padded

    # Inline content.

    def inlines(
        self, nodes: Sequence[Inline], active: frozenset[Style] = NO_STYLES, in_link: bool = False
    ) -> str:
        """Render inline nodes. ``active`` are the styles already open around them (a style
        is never opened twice); ``in_link`` is true inside a link label."""
        if len(nodes) == 1 and type(nodes[0]) is Text:  # the common case, short
            return self.text(nodes[0].text)
        text = self.text
        parts: list[str] = []
        append = parts.append
        # isinstance rather than match here: every reply's text goes through this loop, and
        # a class pattern costs more than the markup it dispatches to
        for node in nodes:
            if isinstance(node, Text):
                append(text(node.text))
            elif isinstance(node, Code):
                append(self.code(node.text, in_link))
            elif isinstance(node, Styled):
                style = node.style
                if style in active:
                    append(self.inlines(node.children, active, in_link))
                else:
                    append(
                        self.styled(style, self.inlines(node.children, WITH_STYLE[active][style], in_link))
                    )
            elif isinstance(node, Break):
                append(self.line_break(node.hard))
            else:
                append(self.inlines(node.children, active, True) if in_link else self.link(node, active))
        return self.join_inlines(nodes, parts)

    def join_inlines(self, nodes: Sequence[Inline], parts: list[str]) -> str:
        """Join the rendered ``parts`` of ``nodes`` (Markdown fixes delimiters that touch)."""
        return "".join(parts)

    # Hooks. The defaults produce plain text.

    def text(self, text: str) -> str:
        return text

    def code(self, text: str, in_link: bool) -> str:
        """An inline code span; ``in_link`` when inside a link label."""
        return text

    def line_break(self, hard: bool) -> str:
        return "\n"

    def styled(self, style: Style, inner: str) -> str:
        return self.opening[style] + inner + self.closing[style]

    def link(self, link: Link, active: frozenset[Style]) -> str:
        return self.inlines(link.children, active, True) + link.plain_suffix

    def paragraph(self, inner: str) -> str:
        return inner

    def heading(self, level: int, children: list[Inline]) -> str:
        return self.inlines(children)

    def code_block(self, code: str, lang: str) -> str:
        return code

    def quote(self, inner: str, depth: int) -> str:
        return inner

    def table(self, table: Table) -> str:
        return layout(table)

    def rule(self) -> str:
        return "———"


def is_safe_web_url(href: str, schemes: tuple[str, ...] = ("http://", "https://")) -> bool:
    """Whether ``href`` is an absolute URL with one of ``schemes`` (compared case-insensitively)."""
    start = href[:12].lower()
    for scheme in schemes:
        if start.startswith(scheme) and len(href) > len(scheme):
            return True
    return False
