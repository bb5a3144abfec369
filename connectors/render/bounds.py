"""Cheap lower bounds of a block's rendered length.

Rendering the whole of a block much larger than a message only to learn that it does not
fit would make long replies slow. A block's *lower bound* never exceeds its rendered
length on any platform: the characters of its text other than spaces (renderers drop at
most spaces: a Markdown paragraph's leading ones), all of its code, and the line breaks,
list markers and rules that every platform shows. A block whose lower bound is over the
limit cannot fit, so it is cut without being rendered whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from connectors.render.ir import (
    Block,
    Break,
    CodeBlock,
    Heading,
    Inline,
    Link,
    ListBlock,
    Paragraph,
    Quote,
    Rule,
    Styled,
    Table,
)

RULE_LENGTH = 3
"""A thematic break is shown as three characters everywhere (``———`` or ``***``)."""


def visible_chars(text: str) -> int:
    """The characters of ``text`` other than spaces."""
    return len(text) - text.count(" ")


def inline_bound(nodes: Sequence[Inline], cap: float = float("inf")) -> int:
    """Lower bound of the rendered length of inline nodes; stops counting past ``cap``."""
    total = 0
    for node in nodes:
        kind = type(node)
        if kind is Styled or kind is Link:
            total += inline_bound(node.children, cap - total)  # type: ignore[union-attr]
        elif kind is not Break:
            total += visible_chars(node.text)  # type: ignore[union-attr]
        if total > cap:
            break
    return total


def lower_bound(block: Block, cap: float = float("inf")) -> int:
    """Lower bound of ``block``'s rendered length on every platform; stops past ``cap``."""
    kind = type(block)
    if kind is Paragraph or kind is Heading:
        return inline_bound(block.children, cap)  # type: ignore[union-attr]
    if kind is CodeBlock:
        return len(block.code)  # type: ignore[union-attr]
    if kind is ListBlock:
        lst: ListBlock = block  # type: ignore[assignment]
        joiner = 1 if lst.tight else 2
        # each item's marker unless it continues one, and the line breaks between items and
        # between the blocks of an item
        total = joiner * (len(lst.items) - 1)
        for item in lst.items:
            total += (0 if item.continued else 1) + joiner * max(len(item.blocks) - 1, 0)
        return _sum((b for item in lst.items for b in item.blocks), cap, total)
    if kind is Quote:
        blocks = block.blocks  # type: ignore[union-attr]
        return _sum(blocks, cap, 2 * (len(blocks) - 1))  # blocks are a blank line apart
    if kind is Table:
        table: Table = block  # type: ignore[assignment]
        # and a line break between rows
        total = sum(visible_chars(c) for c in table.header_plain or ()) + max(len(table.rows) - 1, 0)
        for row in table.rows_plain:
            if total > cap:
                break
            total += sum(visible_chars(c) for c in row)
        return total
    if kind is Rule:
        return RULE_LENGTH
    return 0


def _sum(blocks: Iterable[Block], cap: float, total: int) -> int:
    for b in blocks:
        total += lower_bound(b, cap - total)
        if total > cap:
            break
    return max(total, 0)
