"""Cheap size bounds, and cutting a huge block down to the part a cut can reach.

Cutting a block needs renders of candidate heads; rendering the whole of a block much
larger than a message for every message would make long replies quadratic. A block's
*lower bound* (its characters other than spaces) never exceeds its rendered length on
any platform, so a head whose lower bound is over the limit cannot fit. The *window* is
the shortest run of a block's top-level children whose lower bound passes the limit:
every head that fits lies inside it, so only the window is cut and rendered, and its
tail is joined back to the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    Styled,
    Table,
)
from connectors.render.table import split_rows


def _chars(text: str) -> int:
    # Renderers drop at most spaces (leading ones, in Markdown paragraphs).
    return len(text) - text.count(" ")


def _count(text: str, wanted: float, skipped: str) -> tuple[int, int]:
    """Count the characters of ``text`` not in ``skipped`` until ``wanted`` are found:
    ``(count, end)``, ``end`` being where the counting stopped (the count is exact up to
    there). Jumps in steps of the number still wanted, so a long text costs a few scans of
    what it takes rather than a scan of all of it."""
    at = count = 0
    while count < wanted and at < len(text):
        end = at + int(min(wanted - count, len(text) - at))
        count += end - at - sum(text.count(char, at, end) for char in skipped)
        at = end
    return count, at


def inline_bound(nodes: Sequence[Inline], cap: float = float("inf")) -> int:
    """Lower bound of the rendered length of inline nodes; stops counting past ``cap``."""
    total = 0
    for node in nodes:
        kind = type(node)
        if kind is Styled or kind is Link:
            total += inline_bound(node.children, cap - total)  # type: ignore[union-attr]
        elif kind is not Break:
            total += _chars(node.text)  # type: ignore[union-attr]
        if total > cap:
            break
    return total


def lower_bound(block: Block, cap: float = float("inf")) -> int:
    """Lower bound of ``block``'s rendered length on every platform; stops past ``cap``."""
    kind = type(block)
    if kind is Paragraph or kind is Heading:
        return inline_bound(block.children, cap)  # type: ignore[union-attr]
    if kind is CodeBlock:
        return _count(block.code, cap + 1, " ")[0]  # type: ignore[union-attr]
    if kind is ListBlock:
        return _sum(
            (b for item in block.items for b in item.blocks),  # type: ignore[union-attr]
            cap,
        )
    if kind is Quote:
        return _sum(block.blocks, cap)  # type: ignore[union-attr]
    if kind is Table:
        total = sum(_chars(c) for c in block.header_plain or ())  # type: ignore[union-attr]
        for row in block.rows_plain:  # type: ignore[union-attr]
            if total > cap:
                break
            total += sum(_chars(c) for c in row)
        return total
    return 0


def _sum(blocks: Sequence[Block] | object, cap: float) -> int:
    total = 0
    for b in blocks:  # type: ignore[attr-defined]
        total += lower_bound(b, cap - total)
        if total > cap:
            break
    return total


def take_window(block: Block, limit: int) -> tuple[Block, Block, str] | None:
    """``(window, rest, joint)`` with ``window`` the shortest prefix of ``block`` that cannot
    fit in ``limit``, ``rest`` the remainder and ``joint`` what separates them in plain text;
    ``None`` when the window would be the whole block."""
    kind = type(block)
    if kind is Paragraph or kind is Heading:
        children = block.children  # type: ignore[union-attr]
        count = _prefix(children, limit, lambda node, cap: inline_bound([node], cap))
        if count >= len(children):
            return None
        if kind is Paragraph:
            return Paragraph(children[:count]), Paragraph(children[count:]), ""
        level = block.level  # type: ignore[union-attr]
        return Heading(level, children[:count]), Heading(level, children[count:]), ""
    if kind is ListBlock:
        lst: ListBlock = block  # type: ignore[assignment]
        count = _prefix(lst.items, limit, lambda item, cap: _sum(item.blocks, cap))
        if count >= len(lst.items):
            return None
        window = ListBlock(lst.items[:count], lst.ordered, lst.start, lst.tight)
        rest = ListBlock(lst.items[count:], lst.ordered, lst.start + count, lst.tight)
        return window, rest, "\n" if lst.tight else "\n\n"
    if kind is Quote:
        blocks = block.blocks  # type: ignore[union-attr]
        count = _prefix(blocks, limit, lower_bound)
        if count >= len(blocks):
            return None
        return Quote(blocks[:count]), Quote(blocks[count:]), "\n\n"
    if kind is Table:
        table: Table = block  # type: ignore[assignment]
        total = sum(_chars(c) for c in table.header_plain or ())
        count = 0
        while count < len(table.rows_plain) and total <= limit:
            total += sum(_chars(c) for c in table.rows_plain[count])
            count += 1
        if total <= limit or not 0 < count < len(table.rows):
            return None
        window, rest = split_rows(table, count)
        return window, rest, "\n"
    if kind is CodeBlock:
        # the window ends with the line holding the character that passes the limit
        code = block.code  # type: ignore[union-attr]
        count, past = _count(code, limit + 1, " \n")  # lines are counted without their break
        end = code.find("\n", past - 1) if count > limit else -1
        if end < 0:
            return None
        lang = block.lang  # type: ignore[union-attr]
        return CodeBlock(code[:end], lang), CodeBlock(code[end + 1 :], lang), "\n"
    return None


def join(tail: Block, rest: Block) -> Block | None:
    """The window's tail joined back to the rest (``None`` when they are of different kinds,
    as when a table part fell back to code)."""
    if type(tail) is not type(rest):
        return None
    if type(tail) is Paragraph:
        return Paragraph([*tail.children, *rest.children])  # type: ignore[union-attr]
    if type(tail) is Heading:
        return Heading(tail.level, [*tail.children, *rest.children])  # type: ignore[union-attr]
    if type(tail) is ListBlock:
        return ListBlock(
            [*tail.items, *rest.items],  # type: ignore[union-attr]
            tail.ordered,  # type: ignore[union-attr]
            tail.start,  # type: ignore[union-attr]
            tail.tight,  # type: ignore[union-attr]
        )
    if type(tail) is Quote:
        return Quote([*tail.blocks, *rest.blocks])  # type: ignore[union-attr]
    if type(tail) is Table:
        if tail.header is not None:  # type: ignore[union-attr]
            return None
        return Table(
            None,
            [*tail.rows, *rest.rows],  # type: ignore[union-attr]
            tail.aligns,  # type: ignore[union-attr]
            tail.widths,  # type: ignore[union-attr]
            None,
            [*tail.rows_plain, *rest.rows_plain],  # type: ignore[union-attr]
            [*tail.lines, *rest.lines],  # type: ignore[union-attr]
        )
    if type(tail) is CodeBlock:
        return CodeBlock(tail.code + "\n" + rest.code, tail.lang)  # type: ignore[union-attr]
    return None


def _prefix(children: Sequence[object], limit: int, bound: object) -> int:
    """How many leading children it takes for their lower bound to pass ``limit``."""
    total = 0
    for count, child in enumerate(children, 1):
        total += bound(child, limit - total)  # type: ignore[operator]
        if total > limit:
            return count
    return len(children)
