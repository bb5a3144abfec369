"""Cutting a block that is too big for a message into heads that fit, one message at a time.

Cuts prefer the coarsest boundary: between blocks (list items, quoted blocks, table
rows), then at line breaks, sentence ends, spaces, and finally anywhere (never between a
character and the marks that combine with it). A finer boundary wins only when the
coarser one would leave the message less than half full. The whitespace at a cut is
dropped from both sides; the chunker keeps it in the plain-text twin.

A :class:`Cursor` holds the rest of a block as a position in it (a character offset into
a paragraph's text or a code block, a table row, a list item or quoted block, with a
cursor into the one being cut), so a cut only looks at what a head can reach. The rest
is built as a block of its own only once it may fit (:meth:`Cursor.bound`): however long
the block, each message costs what that message holds.

Every cut takes ``measure`` (a block -> its rendered length as a top-level block) and
``limit``; the head returned satisfies ``measure(head) <= limit``. This module cuts
structure (quotes, list items, table rows); :mod:`.text_cursors` cuts text, with the
searches of :mod:`.cursor`.
"""

from __future__ import annotations

from collections.abc import Callable

from connectors.render.bounds import lower_bound, visible_chars
from connectors.render.cursor import Cursor, Measure, Step, Whole, last_fitting, suffix_sums
from connectors.render.ir import Block, CodeBlock, Heading, ListBlock, ListItem, Paragraph, Quote, Table
from connectors.render.plain import PLAIN, plain_block
from connectors.render.table import layout
from connectors.render.text_cursors import CodeCursor, InlineCursor


def open_cursor(block: Block) -> Cursor:
    """A cursor over all of ``block``."""
    match block:
        case Paragraph():
            return InlineCursor(block.children, Paragraph)
        case Heading(level=level):
            return InlineCursor(block.children, lambda children: Heading(level, children))
        case CodeBlock():
            return CodeCursor(block)
        case ListBlock():
            return ListCursor(block)
        case Quote():
            return BlocksCursor(block.blocks, Quote, PLAIN.block_joiner)
        case Table():
            return TableCursor(block)
        case _:
            return Whole(block)


# Containers of blocks: a quote's blocks, a list item's blocks, a list's items.


class BlocksCursor(Cursor):
    """The rest of a sequence of blocks shown by ``wrap`` (a quote, or one list item),
    joined by ``joiner`` in plain text."""

    def __init__(self, blocks: list[Block], wrap: Callable[[list[Block]], Block], joiner: str) -> None:
        self.blocks = blocks
        self.wrap = wrap
        self.joiner = joiner
        self.index = 0
        self.first = blocks[0]  # what is left of blocks[index]
        self.first_bound: int | None = None
        self.inner: Cursor | None = None  # cutting ``first``, which fits in no message on its own
        # after[i]: lower bound of blocks[i:], each with the joiner before it
        self.after = suffix_sums([lower_bound(b) + len(joiner) for b in blocks])

    def bound(self, cap: float) -> int:
        first = self.inner.bound(cap) if self.inner is not None else self._first_bound(cap)
        return first + self.after[self.index + 1]

    def rest_blocks(self) -> list[Block]:
        first = self.first if self.inner is None else self.inner.rest()
        return [first, *self.blocks[self.index + 1 :]]

    def rest(self) -> Block:
        return self.wrap(self.rest_blocks())

    def starts_blank(self) -> bool:
        return self.inner.starts_blank() if self.inner is not None else _starts_blank(self.first)

    def take(self, measure: Measure, limit: int) -> Step | None:
        if self.inner is not None and self.inner.bound(limit) <= limit:
            self.first, self.first_bound, self.inner = self.inner.rest(), None, None
        if self.inner is None:
            # whole blocks, when at least the first fits; the rest keeps one at least
            k = last_fitting(len(self.blocks) - self.index - 1, lambda i: self._fits(i + 1, measure, limit))
            if k >= 0:
                head = self.wrap(self._run(k + 1))
                self.index += k + 1
                self.first, self.first_bound = self.blocks[self.index], None
                return head, self.joiner
            self.inner = open_cursor(self.first)
        wrap = self.wrap
        step = self.inner.take(lambda b: measure(wrap([b])), limit)
        if step is None:
            return None
        return wrap([step[0]]), step[1]

    def _run(self, count: int) -> list[Block]:
        return [self.first, *self.blocks[self.index + 1 : self.index + count]]

    def _fits(self, count: int, measure: Measure, limit: int) -> bool:
        bound = self._first_bound(limit) + self.after[self.index + 1] - self.after[self.index + count]
        return bound <= limit and measure(self.wrap(self._run(count))) <= limit

    def _first_bound(self, cap: float) -> int:
        if self.first_bound is None:
            self.first_bound = lower_bound(self.first, cap)
        return self.first_bound


class ListCursor(Cursor):
    """The rest of a list: whole items, or the rest of the item being cut (shown without its
    marker, as the continuation of the item in the message before)."""

    def __init__(self, block: ListBlock) -> None:
        self.block = block
        self.joiner = "\n" if block.tight else "\n\n"
        self.index = 0
        self.first = block.items[0]  # what is left of items[index]
        self.continued = self.first.continued
        self.inner: BlocksCursor | None = None  # cutting ``first``, which fits in no message on its own
        self.pad = ""  # what the plain text indents the lines of ``first`` after its first by
        self.after = suffix_sums([_item_bound(item, self.joiner) + len(self.joiner) for item in block.items])

    def bound(self, cap: float) -> int:
        if self.inner is None:
            first = _item_bound(self.first, self.joiner)
        else:
            first = self.inner.bound(cap) + (0 if self.continued else 1)
        return first + self.after[self.index + 1]

    def rest(self) -> Block:
        return self._list([self._first_item(), *self.block.items[self.index + 1 :]])

    def starts_blank(self) -> bool:
        if not self.continued:
            return False  # the marker shows
        if self.inner is not None:
            return self.inner.starts_blank()
        return not self.first.blocks or _starts_blank(self.first.blocks[0])

    def take(self, measure: Measure, limit: int) -> Step | None:
        if self.inner is not None and self.inner.bound(limit) <= limit:
            self.first, self.inner = self._first_item(), None
        if self.inner is None:
            items = self.block.items
            k = last_fitting(len(items) - self.index - 1, lambda i: self._fits(i + 1, measure, limit))
            if k >= 0:
                head = self._list(self._run(k + 1))
                self.index += k + 1
                self.first = items[self.index]
                self.continued = self.first.continued
                return head, self.joiner
            if not self.first.blocks:
                return None
            self.inner = self._item_cursor()
        step = self.inner.take(measure, limit)
        if step is None:
            return None
        self.continued = True
        part, gap = step
        after_break = plain_block(part).endswith("\n")
        return part, _indent_gap(gap, self.pad, after_break, self.inner.starts_blank())

    def _item_cursor(self) -> BlocksCursor:
        block, number = self.block, self.block.start + self.index
        marker = f"{number}. " if block.ordered else PLAIN.bullets[0]
        self.pad = " " * len(marker)  # every plain bullet is as wide as the first

        def wrap(blocks: list[Block]) -> Block:
            return ListBlock([ListItem(blocks, self.continued)], block.ordered, number, block.tight)

        return BlocksCursor(self.first.blocks, wrap, self.joiner)

    def _first_item(self) -> ListItem:
        if self.inner is None:
            return self.first
        return ListItem(self.inner.rest_blocks(), self.continued)

    def _list(self, items: list[ListItem]) -> ListBlock:
        block = self.block
        return ListBlock(items, block.ordered, block.start + self.index, block.tight)

    def _run(self, count: int) -> list[ListItem]:
        return [self.first, *self.block.items[self.index + 1 : self.index + count]]

    def _fits(self, count: int, measure: Measure, limit: int) -> bool:
        first = _item_bound(self.first, self.joiner)
        bound = first + self.after[self.index + 1] - self.after[self.index + count]
        return bound <= limit and measure(self._list(self._run(count))) <= limit


def _item_bound(item: ListItem, joiner: str) -> int:
    """Lower bound of an item's rendered length: its marker (unless continued) and blocks."""
    blocks = item.blocks
    marker = 0 if item.continued else 1
    return marker + sum(lower_bound(b) for b in blocks) + len(joiner) * max(len(blocks) - 1, 0)


def _indent_gap(gap: str, pad: str, after_break: bool, rest_blank: bool) -> str:
    """A gap inside a list item as the list's plain text shows it: each line the gap starts
    (after a line break in it, or at its start when the head ends with one) indented by
    ``pad``, unless empty. The last runs on into the rest's first line, empty when
    ``rest_blank``."""
    lines = gap.split("\n")
    last = len(lines) - 1
    out: list[str] = []
    for n, line in enumerate(lines):
        starts_line = n > 0 or after_break
        shows = bool(line) or (n == last and not rest_blank)
        out.append(pad + line if starts_line and shows else line)
    return "\n".join(out)


def _starts_blank(block: Block) -> bool:
    match block:
        case CodeBlock():
            return block.code[:1] in ("", "\n")
        case _:
            return plain_block(block)[:1] in ("", "\n")


# Tables: whole rows, or the laid-out text when not even one row fits.


class TableCursor(Cursor):
    def __init__(self, table: Table) -> None:
        self.table = table
        self.row = 0
        self.code: CodeCursor | None = None  # cutting the rest as laid-out text
        self.skip = 0 if table.header is None else 2  # the header and rule lines before the rows'
        self.header_bound = sum(visible_chars(c) for c in table.header_plain or ())
        # after[i]: lower bound of rows[i:], each with the line break before it
        self.after = suffix_sums([sum(visible_chars(c) for c in row) + 1 for row in table.rows_plain])

    def bound(self, cap: float) -> int:
        if self.code is not None:
            return self.code.bound(cap)
        return (self.header_bound if self.row == 0 else 0) + self.after[self.row]

    def rest(self) -> Block:
        return self.code.rest() if self.code is not None else self._part(self.row, len(self.table.rows))

    def starts_blank(self) -> bool:
        if self.code is not None:
            return self.code.starts_blank()
        lines = self._part(self.row, self.row + 1).lines
        return not lines or not lines[0]

    def take(self, measure: Measure, limit: int) -> Step | None:
        if self.code is None:
            low, rows = self.row, len(self.table.rows)
            # the head keeps at least one row, the rest gets at least one
            k = last_fitting(rows - low - 1, lambda i: measure(self._part(low, low + i + 1)) <= limit)
            if k >= 0:
                self.row = low + k + 1
                return self._part(low, self.row), "\n"
            # Not even one row fits: cut the laid-out text like code (same plain text).
            self.code = CodeCursor(CodeBlock(layout(self._part(low, rows))))
        return self.code.take(measure, limit)

    def _part(self, low: int, high: int) -> Table:
        """Rows ``low`` to ``high``, with the header when they are the first."""
        t = self.table
        if low == 0 and t.header is not None:
            return Table(
                t.header,
                t.rows[:high],
                t.aligns,
                t.widths,
                t.header_plain,
                t.rows_plain[:high],
                t.lines[: 2 + high],
            )
        lines = t.lines[self.skip + low : self.skip + high]
        return Table(None, t.rows[low:high], t.aligns, t.widths, None, t.rows_plain[low:high], lines)
