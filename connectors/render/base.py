"""The shared walk over the representation; each platform fills in the markup hooks."""

from __future__ import annotations

from collections.abc import Sequence

from connectors.render.ir import (
    Block,
    Break,
    Code,
    CodeBlock,
    Heading,
    Inline,
    Link,
    ListBlock,
    ListItem,
    Paragraph,
    Quote,
    Style,
    Styled,
    Table,
    Text,
)
from connectors.render.table import layout

NO_STYLES: frozenset[Style] = frozenset()


class Renderer:
    """Renders blocks of the representation to one platform's markup.

    The structure (lists with markers and indentation, quotes, block separation) lives
    here, so the plain-text twin and every platform lay a document out the same way;
    subclasses only say how text, spans and blocks are marked up.

    Attributes:
        format (:obj:`str`): The :attr:`connectors.base.RenderedChunk.format` of the output.
        block_joiner (:obj:`str`): Between consecutive blocks.
        bullets (tuple[:obj:`str`, ...]): Bullet markers by nesting depth (cycled).
    """

    format = "plain"
    block_joiner = "\n\n"
    bullets: tuple[str, ...] = ("• ", "◦ ", "▪ ")

    def block(self, block: Block) -> str:
        """Render one top-level block."""
        return self.render_block(block, 0, 0)

    def render_block(self, block: Block, list_depth: int, quote_depth: int) -> str:
        kind = type(block)
        if kind is Paragraph:
            return self.paragraph(self.inlines(block.children))  # type: ignore[union-attr]
        if kind is Heading:
            return self.heading(block.level, block.children)  # type: ignore[union-attr]
        if kind is CodeBlock:
            return self.code_block(block.code, block.lang)  # type: ignore[union-attr]
        if kind is ListBlock:
            return self.list_block(block, list_depth, quote_depth)  # type: ignore[arg-type]
        if kind is Quote:
            inner = self.block_joiner.join(
                self.render_block(child, list_depth, quote_depth + 1)
                for child in block.blocks  # type: ignore[union-attr]
            )
            return self.quote(inner, quote_depth)
        if kind is Table:
            return self.table(block)  # type: ignore[arg-type]
        return self.rule()

    # Lists are laid out here for every platform: marker, then the item's blocks with
    # continuation lines indented to the marker's width.

    def list_block(self, block: ListBlock, depth: int, quote_depth: int) -> str:
        joiner = "\n" if block.tight else "\n\n"
        render = self.render_block
        parts: list[str] = []
        for n, item in enumerate(block.items):
            marker = self.marker(block, n, depth)
            body = joiner.join([render(b, depth + 1, quote_depth) for b in item.blocks])
            parts.append(self._item(marker, body, item))
        return joiner.join(parts)

    def _item(self, marker: str, body: str, item: ListItem) -> str:
        if not body:
            return "" if item.continued else marker.rstrip()
        first = "" if item.continued else marker
        if "\n" not in body:
            return first + body
        lines = body.split("\n")
        return first + lines[0] + "\n" + "\n".join(self.pad_lines(lines[1:], " " * len(marker)))

    def marker(self, block: ListBlock, index: int, depth: int) -> str:
        if block.ordered:
            return f"{block.start + index}. "
        return self.bullets[depth % len(self.bullets)]

    def pad_lines(self, lines: Sequence[str], pad: str) -> list[str]:
        """Indent continuation lines of a list item (blank lines stay empty)."""
        return [pad + line if line else line for line in lines]

    # Inline content.

    def inlines(
        self, nodes: Sequence[Inline], active: frozenset[Style] = NO_STYLES, in_link: bool = False
    ) -> str:
        """Render inline nodes. ``active`` are the styles already open around them (a style
        is never opened twice); ``in_link`` is true inside a link label."""
        if len(nodes) == 1 and type(nodes[0]) is Text:  # the common case, short
            return self.text(nodes[0].text)
        parts: list[str] = []
        for node in nodes:
            kind = type(node)
            if kind is Text:
                parts.append(self.text(node.text))  # type: ignore[union-attr]
            elif kind is Code:
                parts.append(self.code(node.text, in_link))  # type: ignore[union-attr]
            elif kind is Break:
                parts.append(self.line_break(node.hard))  # type: ignore[union-attr]
            elif kind is Styled:
                style = node.style  # type: ignore[union-attr]
                inner = self.inlines(node.children, active | {style}, in_link)  # type: ignore[union-attr]
                parts.append(inner if style in active else self.styled(style, inner))
            else:
                assert isinstance(node, Link)
                if in_link:
                    parts.append(self.inlines(node.children, active, True))
                else:
                    parts.append(self.link(node, active))
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
        return inner

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
    return any(start.startswith(scheme) and len(href) > len(scheme) for scheme in schemes)
