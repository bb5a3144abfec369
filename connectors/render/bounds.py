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
    Code,
    CodeBlock,
    Heading,
    Inline,
    ListBlock,
    Paragraph,
    Quote,
    Rule,
    Table,
    Text,
)

RULE_LENGTH = 3
"""A thematic break is shown as three characters everywhere (``———`` or ``***``)."""


def visible_chars(text: str) -> int:
    """The characters of ``text`` other than spaces."""
    return len(text) - text.count(" ")


def inline_bound(nodes: Sequence[Inline], cap: float = float("inf")) -> int:
    """Lower bound of the rendered length of inline nodes; stops counting past ``cap``."""
    total = 0
    for node in nodes:  # isinstance rather than match: a class pattern costs more here
        if isinstance(node, (Text, Code)):
            total += visible_chars(node.text)
        elif not isinstance(node, Break):
            total += inline_bound(node.children, cap - total)
        if total > cap:
            break
    return total


def lower_bound(block: Block, cap: float = float("inf")) -> int:
    """Lower bound of ``block``'s rendered length on every platform; stops past ``cap``."""
    match block:
        case Paragraph() | Heading():
            return inline_bound(block.children, cap)
        case CodeBlock():
            return len(block.code)
        case ListBlock():
            joiner = 1 if block.tight else 2
            # each item's marker unless it continues one, and the line breaks between items and
            # between the blocks of an item
            total = joiner * (len(block.items) - 1)
            for item in block.items:
                total += (0 if item.continued else 1) + joiner * max(len(item.blocks) - 1, 0)
            return _sum((b for item in block.items for b in item.blocks), cap, total)
        case Quote():
            blocks = block.blocks
            return _sum(blocks, cap, 2 * (len(blocks) - 1))  # blocks are a blank line apart
        case Table():
            # and a line break between rows
            total = sum(visible_chars(c) for c in block.header_plain or ()) + max(len(block.rows) - 1, 0)
            for row in block.rows_plain:
                if total > cap:
                    break
                total += sum(visible_chars(c) for c in row)
            return total
        case Rule():
            return RULE_LENGTH
    return 0


def _sum(blocks: Iterable[Block], cap: float, total: int) -> int:
    for b in blocks:
        total += lower_bound(b, cap - total)
        if total > cap:
            break
    return max(total, 0)
