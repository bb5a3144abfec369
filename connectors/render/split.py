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
``limit``; the head returned satisfies ``measure(head) <= limit``.
"""

from __future__ import annotations

import bisect
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from connectors.render.bounds import lower_bound, visible_chars
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
    Styled,
    Table,
    Text,
)
from connectors.render.plain import PLAIN, plain_block
from connectors.render.table import layout
from connectors.render.text import safe_cut

Measure = Callable[[Block], int]
Cut = tuple[int, int]  # drop [start, end): the head ends before start, the rest starts at end
Atom = tuple[Text | Code | Break, tuple[Styled | Link, ...]]
Step = tuple[Block, str]  # a head, and the plain text dropped between it and the rest
Finder = Callable[[int], Cut | None]  # a level's last boundary in the head that ends at a position

_SENTENCE_END = re.compile(r"(?<=[.!?\u2026])\s+|(?<=[\u3002\uff01\uff1f])(?=\S)")
_SPACE = re.compile(r"\s+")
_VISIBLE = re.compile(r"\S")
_PROSE = (Text,)  # where sentences end
_WORDS = (Text, Code)  # where words are cut
_SEARCH_BACK = 64  # characters before a head's end searched first for its last boundary


class Cursor(ABC):
    """The rest of a block that is being cut into heads, front first."""

    @abstractmethod
    def bound(self, cap: float) -> int:
        """A lower bound of the rest's rendered length on every platform (counting may stop
        once it passes ``cap``)."""

    @abstractmethod
    def rest(self) -> Block:
        """The rest as a block of its own."""

    @abstractmethod
    def take(self, measure: Measure, limit: int) -> Step | None:
        """Cut a head that fits off the front of the rest: ``(head, gap)``, ``gap`` being the
        plain text dropped between the head and the new rest. ``None`` when the rest cannot
        be cut that small (the cursor may have changed then: the caller gives it up)."""

    @abstractmethod
    def starts_blank(self) -> bool:
        """Whether the rest's plain text starts with an empty line (a list item indents only
        the lines that show something)."""


def open_cursor(block: Block) -> Cursor:
    """A cursor over all of ``block``."""
    kind = type(block)
    if kind is Paragraph:
        return InlineCursor(block.children, Paragraph)  # type: ignore[union-attr]
    if kind is Heading:
        level = block.level  # type: ignore[union-attr]
        return InlineCursor(block.children, lambda children: Heading(level, children))  # type: ignore[union-attr]
    if kind is CodeBlock:
        return CodeCursor(block)  # type: ignore[arg-type]
    if kind is ListBlock:
        return ListCursor(block)  # type: ignore[arg-type]
    if kind is Quote:
        return BlocksCursor(block.blocks, Quote, PLAIN.block_joiner)  # type: ignore[union-attr]
    if kind is Table:
        return TableCursor(block)  # type: ignore[arg-type]
    return _Whole(block)


def last_fitting(count: int, fits: Callable[[int], bool], guess: int = 0) -> int:
    """The largest ``i`` in ``range(count)`` with ``fits(i)``, or -1 when ``fits(0)`` is false.

    Gallops from ``guess`` (up when it fits, down when it does not), then bisects, so the
    cost follows the distance from the guess to the answer rather than ``count``.
    ``fits`` is expected to be (nearly) monotone; the answer always is an index for which
    it returned true.
    """
    if count <= 0:
        return -1
    guess = min(max(guess, 0), count - 1)
    step = 1
    if fits(guess):
        low, high = guess, count
        while low + step < count:
            if not fits(low + step):
                high = low + step
                break
            low += step
            step *= 2
    else:
        high = guess
        while True:
            if high == 0:
                return -1
            probe = max(high - step, 0)
            if fits(probe):
                low = probe
                break
            high = probe
            step *= 2
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            low = mid
        else:
            high = mid
    return low


class _Whole(Cursor):
    """A block that is never cut (a rule)."""

    def __init__(self, block: Block) -> None:
        self.block = block

    def bound(self, cap: float) -> int:
        return lower_bound(self.block, cap)

    def rest(self) -> Block:
        return self.block

    def take(self, measure: Measure, limit: int) -> Step | None:
        return None

    def starts_blank(self) -> bool:
        return False


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
        self.after = _suffix_sums([lower_bound(b) + len(joiner) for b in blocks])

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
        self.after = _suffix_sums([_item_bound(item, self.joiner) + len(self.joiner) for item in block.items])

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
        head, gap = step
        after_break = plain_block(head).endswith("\n")
        return head, _indent_gap(gap, self.pad, after_break, self.inner.starts_blank())

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
    if type(block) is CodeBlock:
        return block.code[:1] in ("", "\n")  # type: ignore[union-attr]
    return plain_block(block)[:1] in ("", "\n")


def _suffix_sums(sizes: list[int]) -> list[int]:
    """``out[i] == sum(sizes[i:])``, with ``out[len(sizes)] == 0``."""
    out = [0] * (len(sizes) + 1)
    for i in range(len(sizes) - 1, -1, -1):
        out[i] = out[i + 1] + sizes[i]
    return out


# Tables: whole rows, or the laid-out text when not even one row fits.


class TableCursor(Cursor):
    def __init__(self, table: Table) -> None:
        self.table = table
        self.row = 0
        self.code: CodeCursor | None = None  # cutting the rest as laid-out text
        self.skip = 0 if table.header is None else 2  # the header and rule lines before the rows'
        self.header_bound = sum(visible_chars(c) for c in table.header_plain or ())
        # after[i]: lower bound of rows[i:], each with the line break before it
        self.after = _suffix_sums([sum(visible_chars(c) for c in row) + 1 for row in table.rows_plain])

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


# Code blocks: at line breaks, else anywhere.


class CodeCursor(Cursor):
    def __init__(self, block: CodeBlock) -> None:
        self.code = block.code
        self.lang = block.lang
        self.pos = 0
        self.guess = 0  # how long the last head's longest fit was

    def bound(self, cap: float) -> int:
        return len(self.code) - self.pos  # every character of code is shown

    def rest(self) -> Block:
        return CodeBlock(self.code[self.pos :], self.lang)

    def starts_blank(self) -> bool:
        return self.code[self.pos : self.pos + 1] in ("", "\n")

    def take(self, measure: Measure, limit: int) -> Step | None:
        code, lang, pos = self.code, self.lang, self.pos
        visible = _VISIBLE.search(code, pos)
        if visible is None:
            return None
        first = visible.start()  # a head must show more than whitespace
        bound = min(len(code) - 1, pos + limit)  # rendered code is never shorter than the code

        def head_size(cut: Cut) -> int:
            return measure(CodeBlock(code[pos : cut[0]], lang))

        def line(reach: int) -> Cut | None:
            at = code.rfind("\n", first + 1, reach + 1)
            return (at, at + 1) if 0 <= at < len(code) - 1 else None

        def skip(position: int) -> int:
            while position < len(code) and code[position] in " \t":
                position += 1
            return position

        reach = _longest_head(head_size, limit, first, bound, self.guess)
        if reach < 0:
            return None
        cut = _best_cut([line], head_size, limit, lambda p: safe_cut(code, p), first, reach, skip)
        if cut is None:
            return None
        self.pos, self.guess = cut[1], reach - first
        return CodeBlock(code[pos : cut[0]], lang), code[cut[0] : cut[1]]


# Paragraphs and headings: cut the inline tree.


class InlineCursor(Cursor):
    """The rest of a paragraph or heading (``make`` builds either from inline nodes) from a
    character offset into its text: the inline tree is flattened into leaves, each with the
    spans and links around it, and heads are built again from the leaves they cover."""

    def __init__(self, children: list[Inline], make: Callable[[list[Inline]], Block]) -> None:
        atoms: list[Atom] = []
        _flatten(children, (), atoms)
        # empty text shows nothing and falls in no slice
        self.atoms = [atom for atom in atoms if type(atom[0]) is Break or atom[0].text]  # type: ignore[union-attr]
        self.starts: list[int] = []
        total = 0
        for leaf, _ in self.atoms:
            self.starts.append(total)
            total += 1 if type(leaf) is Break else len(leaf.text)  # type: ignore[union-attr]
        self.total = total
        self.after = _suffix_sums(_atom_bounds(self.atoms))
        self.make = make
        self.pos = 0
        self.guess = 0  # how long the last head's longest fit was
        self.cut_links: set[int] = set()  # links the last cut went through: the rest starts inside them

    def bound(self, cap: float) -> int:
        # The characters from the first visible one (Markdown drops a paragraph's leading
        # spaces), and the addresses of the links that start there or later.
        first = self._first_visible()
        if first >= self.total:
            return 0
        i = self._atom_at(first)
        return self.starts[i] + len(self.atoms[i][0].text) - first + self.after[i + 1]  # type: ignore[union-attr]

    def rest(self) -> Block:
        atoms = _slice(self.atoms, self.starts, self.pos, self.total)
        return self.make(_rebuild(atoms, self.cut_links, set()))

    def starts_blank(self) -> bool:
        if self.pos >= self.total:
            return True
        i = self._atom_at(self.pos)
        leaf = self.atoms[i][0]
        return type(leaf) is Break or leaf.text[self.pos - self.starts[i]] == "\n"  # type: ignore[union-attr]

    def take(self, measure: Measure, limit: int) -> Step | None:
        atoms, starts, total, pos = self.atoms, self.starts, self.total, self.pos
        if total - pos < 2:
            return None
        first = self._first_visible()
        if first >= total:
            return None
        bound = min(total - 1, pos + limit)  # a head renders to at least its characters

        def head_size(cut: Cut) -> int:
            return measure(self.make(self._head(cut)[0]))

        def hard(position: int) -> int:
            i = bisect.bisect_right(starts, position) - 1
            leaf = atoms[i][0]
            if type(leaf) is Break:
                return position
            return starts[i] + safe_cut(leaf.text, position - starts[i])  # type: ignore[union-attr]

        def skip(position: int) -> int:
            # the whitespace (or the line break) right after a hard cut goes with the cut
            i = bisect.bisect_right(starts, position) - 1
            leaf = atoms[i][0]
            if type(leaf) is Break:
                return position + 1 if starts[i] == position and position + 1 < total else position
            text = leaf.text  # type: ignore[union-attr]
            found = _VISIBLE.search(text, position - starts[i])
            return starts[i] + (found.start() if found else len(text))

        levels: list[Finder] = [
            lambda reach: self._last_break(first, reach),
            lambda reach: self._last_run(_SENTENCE_END, _PROSE, first, reach),
            lambda reach: self._last_run(_SPACE, _WORDS, first, reach),
        ]
        reach = _longest_head(head_size, limit, first, bound, self.guess)
        if reach < 0:
            return None
        reach = self._past_links(reach, head_size, limit, bound)
        self.guess = reach - first
        cut = _best_cut(levels, head_size, limit, hard, first, reach, skip)
        if cut is None:
            return None
        children, links = self._head(cut)
        start, end = cut
        gap = "".join(
            "\n" if type(leaf) is Break else leaf.text for leaf, _ in _slice(atoms, starts, start, end)
        )  # type: ignore[union-attr]
        self.pos, self.cut_links = end, links
        return self.make(children), gap

    def _head(self, cut: Cut) -> tuple[list[Inline], set[int]]:
        """The inline nodes of the head a cut makes, and the links the cut goes through."""
        atoms = _slice(self.atoms, self.starts, self.pos, cut[0])
        links = _links(atoms[-1:]) & _links(_slice(self.atoms, self.starts, cut[1], cut[1] + 1))
        return _rebuild(atoms, self.cut_links, links), links

    def _past_links(self, reach: int, head_size: Callable[[Cut], int], limit: int, bound: int) -> int:
        """``reach`` moved past the link that starts there or that it falls inside of, and
        on, as long as heads still fit there.

        A link cut in two can show more than the whole link (an autolink shows its address
        once, its parts each show it), so heads ending inside it may not fit while the head
        that takes all of it does."""
        while True:
            end = self._link_end(reach)
            if end is None or end > bound or head_size((end, end)) > limit:
                return reach
            reach = end + last_fitting(bound - end + 1, lambda i, end=end: head_size((end + i,) * 2) <= limit)

    def _link_end(self, position: int) -> int | None:
        """Where the link that holds the character at ``position`` ends (``None`` when none does)."""
        if position >= self.total:
            return None
        i = self._atom_at(position)
        link = _link_of(self.atoms[i][1])
        if link is None:
            return None
        while i + 1 < len(self.atoms) and _link_of(self.atoms[i + 1][1]) is link:
            i += 1
        return self.starts[i + 1] if i + 1 < len(self.atoms) else self.total

    def _atom_at(self, position: int) -> int:
        return max(bisect.bisect_right(self.starts, position) - 1, 0)

    def _first_visible(self) -> int:
        """Offset of the rest's first character that is not whitespace (a head must include it)."""
        for i in range(self._atom_at(self.pos), len(self.atoms)):
            leaf = self.atoms[i][0]
            if type(leaf) is not Break:
                found = _VISIBLE.search(leaf.text, max(self.pos - self.starts[i], 0))  # type: ignore[union-attr]
                if found is not None:
                    return self.starts[i] + found.start()
        return self.total

    def _last_break(self, first: int, reach: int) -> Cut | None:
        """The last line break after ``first`` that a head ending by ``reach`` can end at."""
        for i in range(self._atom_at(reach), -1, -1):
            offset = self.starts[i]
            if offset <= first:
                break
            if type(self.atoms[i][0]) is Break and offset + 1 < self.total:
                return offset, offset + 1
        return None

    def _last_run(
        self, pattern: re.Pattern[str], kinds: tuple[type, ...], first: int, reach: int
    ) -> Cut | None:
        """The last whitespace ``pattern`` matches in leaves of ``kinds`` after ``first`` that
        a head ending by ``reach`` can end at, with something left after it."""
        for i in range(self._atom_at(reach), -1, -1):
            offset = self.starts[i]
            leaf = self.atoms[i][0]
            if type(leaf) in kinds:
                text = leaf.text  # type: ignore[union-attr]
                found = _last_match(pattern, text, first - offset + 1, reach - offset, self.total - offset)
                if found is not None:
                    return offset + found[0], offset + found[1]
            if offset <= first:
                break
        return None


def _last_match(pattern: re.Pattern[str], text: str, low: int, high: int, total: int) -> Cut | None:
    """The last match of ``pattern`` (whitespace, or a position) in ``text`` that starts in
    ``[low, high]`` and ends before ``total``, with the whole of its whitespace run.
    ``low - 1``, when in the text, shows a character: no run starts before it and ends after.

    Searches ever longer stretches back from ``high``, so the cost follows the distance
    to the match rather than the length of the text."""
    high = min(high, len(text))  # no match starts past the end: search back from there
    stop = min(len(text), high + 2)  # one character past ``high`` for a lookahead
    floor = max(low - 1, 0)
    begin = max(high - _SEARCH_BACK, floor)
    while True:
        last = None
        for match in pattern.finditer(text, begin, stop):
            start, end = match.start(), match.end()
            if end == stop:  # the search stopped inside the whitespace run
                visible = _VISIBLE.search(text, end)
                end = visible.start() if visible else len(text)
            if low <= start <= high and end < total:
                last = start, end
        # A run that the stretch starts inside of begins before it: look further back.
        if last is not None and (last[0] > begin or begin == floor or not text[begin - 1].isspace()):
            return last
        if begin == floor:
            return None
        begin = max(2 * begin - high, floor)


def _link_of(path: tuple[Styled | Link, ...]) -> Link | None:
    for node in path:
        if type(node) is Link:
            return node  # links do not nest
    return None


def _atom_bounds(atoms: list[Atom]) -> list[int]:
    """What each atom adds to a lower bound of the rendered length: the characters of a
    leaf, and at a link's first leaf what the link's address adds to its label (a link with
    a plain suffix shows its address, in the markup or the suffix, or only a label that is
    the address)."""
    sizes = [0 if type(leaf) is Break else len(leaf.text) for leaf, _ in atoms]  # type: ignore[union-attr]
    link: Link | None = None
    first = label = 0
    for i, (_, path) in enumerate(atoms):
        owner = _link_of(path)
        if owner is not link:
            if link is not None and link.plain_suffix:
                sizes[first] += max(len(link.href) - label, 0)
            link, first, label = owner, i, 0
        label += sizes[i]
    if link is not None and link.plain_suffix:
        sizes[first] += max(len(link.href) - label, 0)
    return sizes


def _links(atoms: list[Atom]) -> set[int]:
    # A link is contiguous: it is cut exactly when it holds the last atom before the cut
    # and the first after it.
    return {id(node) for _, path in atoms for node in path if type(node) is Link}


def _longest_head(head_size: Callable[[Cut], int], limit: int, first: int, bound: int, guess: int) -> int:
    """Where the longest head that fits ends, after ``first`` and by ``bound`` (-1 when
    none does), searched from ``first + guess`` (the previous message's length, as a rule
    close to this one's)."""
    p = last_fitting(bound - first, lambda i: head_size((first + i + 1,) * 2) <= limit, guess - 1)
    return -1 if p < 0 else first + p + 1


def _best_cut(
    levels: Sequence[Finder],
    head_size: Callable[[Cut], int],
    limit: int,
    hard: Callable[[int], int],
    first: int,
    reach: int,
    skip: Callable[[int], int],
) -> Cut | None:
    """The cut at the coarsest level that fills at least half the limit, else the fullest.
    Heads end after ``first`` (the first visible character) and by ``reach``, where the
    longest head that fits ends (:func:`_longest_head`); each level's cut is its last
    boundary within that head, so a cut costs a few renders of heads, however many
    boundaries there are. ``hard`` moves a cut anywhere off a grapheme boundary; ``skip``
    gives the end of the whitespace after it, which the cut drops so the rest does not
    start with it."""
    best: Cut | None = None
    best_size = -1
    for find in levels:
        cut = find(reach)
        if cut is None:
            continue
        size = head_size(cut)
        if size > limit:  # a shorter head can show more markup (a link cut in two)
            continue
        if size * 2 >= limit:
            return cut
        if size > best_size:
            best, best_size = cut, size
    # Anywhere: at ``reach``, moved off a grapheme boundary when that still fits.
    position = hard(reach)
    if position != reach and (position <= first or head_size((position, position)) > limit):
        position = reach
    if head_size((position, position)) > best_size:
        return position, skip(position)
    return best


def _flatten(nodes: Sequence[Inline], path: tuple[Styled | Link, ...], out: list[Atom]) -> None:
    for node in nodes:
        if type(node) is Styled or type(node) is Link:
            _flatten(node.children, (*path, node), out)  # type: ignore[union-attr]
        else:
            out.append((node, path))  # type: ignore[arg-type]


def _slice(atoms: list[Atom], starts: list[int], low: int, high: int) -> list[Atom]:
    """The atoms covering characters ``[low, high)``, text atoms trimmed to the range.

    No atom is empty, so every atom between the first and the last lies wholly inside the
    range: only those two are trimmed (or the first dropped)."""
    first = max(0, bisect.bisect_right(starts, low) - 1)
    end = bisect.bisect_left(starts, high, first)
    out = atoms[first:end]
    if not out:
        return out
    last = _trim(out[-1], starts[end - 1], low, high)
    if len(out) == 1:
        return [] if last is None else [last]
    assert last is not None  # it starts inside the range
    out[-1] = last
    head = _trim(out[0], starts[first], low, high)
    if head is None:
        del out[0]
    else:
        out[0] = head
    return out


def _trim(atom: Atom, offset: int, low: int, high: int) -> Atom | None:
    """``atom`` (at ``offset``) cut to the characters ``[low, high)``; ``None`` when none are in it."""
    leaf, path = atom
    if type(leaf) is Break:
        return atom if low <= offset < high else None
    text = leaf.text  # type: ignore[union-attr]
    a, b = max(low - offset, 0), min(high - offset, len(text))
    if a >= b:
        return None
    if a or b < len(text):
        return type(leaf)(text[a:b]), path  # type: ignore[call-arg]
    return atom


def _rebuild(atoms: list[Atom], before: set[int], after: set[int]) -> list[Inline]:
    """Inline trees from atoms, re-opening the styles and links around each.

    A link in ``before`` or ``after`` was cut at the start or the end of these atoms: each
    part of a cut link is an ordinary link (not an autolink), and only its last part keeps
    the address for the plain text.
    """
    root: list[Inline] = []
    containers: list[list[Inline]] = [root]
    open_path: list[Styled | Link] = []
    last_path: tuple[Styled | Link, ...] | None = None
    for leaf, path in atoms:
        if path is last_path:  # a sibling of the previous leaf
            containers[-1].append(leaf)
            continue
        last_path = path
        same = 0
        while same < len(open_path) and same < len(path) and open_path[same] is path[same]:
            same += 1
        del open_path[same:]
        del containers[same + 1 :]
        for node in path[same:]:
            copy: Styled | Link
            if type(node) is Styled:
                copy = Styled(node.style, [])
            else:
                assert isinstance(node, Link)
                if id(node) in after:
                    copy = Link(node.href, [], "")
                elif id(node) in before:
                    copy = Link(node.href, [], node.plain_suffix)
                else:
                    copy = Link(node.href, [], node.plain_suffix, node.auto)
            containers[-1].append(copy)
            containers.append(copy.children)
            open_path.append(node)
        containers[-1].append(leaf)
    return root
