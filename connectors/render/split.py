"""Cutting one block that is too big for a message into a head that fits and a tail.

Cuts prefer the coarsest boundary: between blocks (list items, quoted blocks, table
rows), then at line breaks, sentence ends, spaces, and finally anywhere (never between a
character and the marks that combine with it). A finer boundary wins only when the
coarser one would leave the message less than half full. The whitespace at a cut is
dropped from both sides; the chunker keeps it in the plain-text twin.

Every function takes ``measure`` (a block -> its rendered length as a top-level block)
and ``limit``; the head returned satisfies ``measure(head) <= limit``.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence

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
from connectors.render.table import layout, split_rows
from connectors.render.text import safe_cut

Measure = Callable[[Block], int]
Cut = tuple[int, int]  # drop [start, end): head is before start, tail from end
Atom = tuple[Text | Code | Break, tuple[Styled | Link, ...]]

_SENTENCE_END = re.compile(r"(?<=[.!?\u2026])\s+|(?<=[\u3002\uff01\uff1f])(?=\S)")
_SPACE = re.compile(r"\s+")


def split_block(block: Block, measure: Measure, limit: int) -> tuple[Block, Block] | None:
    """Cut ``block`` into ``(head, tail)`` with ``measure(head) <= limit``, or ``None`` when
    this kind of block cannot be cut that small (the caller falls back to plain text)."""
    kind = type(block)
    if kind is Paragraph:
        return _split_inline(block.children, Paragraph, measure, limit)  # type: ignore[union-attr]
    if kind is Heading:
        level = block.level  # type: ignore[union-attr]
        return _split_inline(block.children, lambda ch: Heading(level, ch), measure, limit)  # type: ignore[union-attr]
    if kind is CodeBlock:
        return _split_code(block, measure, limit)  # type: ignore[arg-type]
    if kind is ListBlock:
        return _split_list(block, measure, limit)  # type: ignore[arg-type]
    if kind is Quote:
        parts = _split_blocks(block.blocks, Quote, measure, limit)  # type: ignore[union-attr]
        return None if parts is None else (Quote(parts[0]), Quote(parts[1]))
    if kind is Table:
        return _split_table(block, measure, limit)  # type: ignore[arg-type]
    return None


def last_fitting(count: int, fits: Callable[[int], bool]) -> int:
    """The largest ``i`` in ``range(count)`` with ``fits(i)``, or -1 when ``fits(0)`` is false.

    Gallops up from 0, then bisects, so the cost follows the size of the answer rather
    than ``count``. ``fits`` is expected to be (nearly) monotone; the answer always is an
    index for which it returned true.
    """
    if count <= 0 or not fits(0):
        return -1
    low, step, high = 0, 1, count
    while low + step < count:
        if fits(low + step):
            low += step
            step *= 2
        else:
            high = low + step
            break
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            low = mid
        else:
            high = mid
    return low


# Containers of blocks.


def _split_blocks(
    blocks: list[Block], wrap: Callable[[list[Block]], Block], measure: Measure, limit: int
) -> tuple[list[Block], list[Block]] | None:
    """Cut a block sequence so that ``wrap(head)`` fits: between blocks when the first
    block fits, otherwise inside the first block."""
    k = last_fitting(len(blocks) - 1, lambda i: measure(wrap(blocks[: i + 1])) <= limit)
    if k >= 0:
        return blocks[: k + 1], blocks[k + 1 :]
    parts = split_block(blocks[0], lambda b: measure(wrap([b])), limit)
    if parts is None:
        return None
    return [parts[0]], [parts[1], *blocks[1:]]


def _split_list(block: ListBlock, measure: Measure, limit: int) -> tuple[Block, Block] | None:
    items, ordered, start, tight = block.items, block.ordered, block.start, block.tight

    def make(chosen: list[ListItem], first: int = start) -> ListBlock:
        return ListBlock(chosen, ordered, first, tight)

    k = last_fitting(len(items) - 1, lambda i: measure(make(items[: i + 1])) <= limit)
    if k >= 0:
        return make(items[: k + 1]), make(items[k + 1 :], start + k + 1)
    first = items[0]
    if not first.blocks:
        return None
    parts = _split_blocks(first.blocks, lambda bs: make([ListItem(bs, first.continued)]), measure, limit)
    if parts is None:
        return None
    head = make([ListItem(parts[0], first.continued)])
    return head, make([ListItem(parts[1], True), *items[1:]])


def _split_table(table: Table, measure: Measure, limit: int) -> tuple[Block, Block] | None:
    # the head keeps at least one row, the tail gets at least one
    k = last_fitting(len(table.rows) - 1, lambda i: measure(split_rows(table, i + 1)[0]) <= limit)
    if k >= 0:
        return split_rows(table, k + 1)
    # Not even one row fits: cut the laid-out text like code (same plain text).
    return _split_code(CodeBlock(layout(table)), measure, limit)


# Code blocks.


def _split_code(block: CodeBlock, measure: Measure, limit: int) -> tuple[Block, Block] | None:
    code, lang = block.code, block.lang
    bound = min(len(code) - 1, limit)  # rendered code is never shorter than the code

    def head_size(cut: Cut) -> int:
        return measure(CodeBlock(code[: cut[0]], lang))

    first = len(code) - len(code.lstrip())  # a head must show more than whitespace
    lines: list[Cut] = []
    at = code.find("\n", first + 1)
    while 0 < at <= bound:
        if at + 1 < len(code):
            lines.append((at, at + 1))
        at = code.find("\n", at + 1)

    def skip(position: int) -> int:
        while position < len(code) and code[position] in " \t":
            position += 1
        return position

    cut = _best_cut([lines], head_size, limit, lambda p: safe_cut(code, p), first, bound, skip)
    if cut is None:
        return None
    return CodeBlock(code[: cut[0]], lang), CodeBlock(code[cut[1] :], lang)


# Paragraphs and headings: cut the inline tree.


def _split_inline(
    children: list[Inline], make: Callable[[list[Inline]], Block], measure: Measure, limit: int
) -> tuple[Block, Block] | None:
    atoms: list[Atom] = []
    _flatten(children, (), atoms)
    starts: list[int] = []
    total = 0
    for leaf, _ in atoms:
        starts.append(total)
        total += 1 if type(leaf) is Break else len(leaf.text)  # type: ignore[union-attr]
    if total < 2:
        return None
    first = _first_visible(atoms, starts)
    if first >= total:
        return None
    atoms, starts = _without_empty(atoms, starts)
    bound = min(total - 1, limit)  # a head renders to at least its characters

    def head_size(cut: Cut) -> int:
        head_atoms = _slice(atoms, starts, 0, cut[0])
        cut_links = _links(head_atoms[-1:]) & _links(_slice(atoms, starts, cut[1], cut[1] + 1))
        return measure(make(_rebuild(head_atoms, cut_links, True)))

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
        offset = position - starts[i]
        return starts[i] + len(text) - len(text[offset:].lstrip())

    levels = _inline_cuts(atoms, starts, first, bound, total)
    cut = _best_cut(levels, head_size, limit, hard, first, bound, skip)
    if cut is None:
        return None
    start, end = cut
    head_atoms = _slice(atoms, starts, 0, start)
    tail_atoms = _slice(atoms, starts, end, total)
    cut_links = _links(head_atoms[-1:]) & _links(tail_atoms[:1])
    return make(_rebuild(head_atoms, cut_links, True)), make(_rebuild(tail_atoms, cut_links, False))


def _links(atoms: list[Atom]) -> set[int]:
    # A link is contiguous: it is cut exactly when it holds the last atom before the cut
    # and the first after it.
    return {id(node) for _, path in atoms for node in path if type(node) is Link}


def _first_visible(atoms: list[Atom], starts: list[int]) -> int:
    """Offset of the first character that is not whitespace (a head must include it)."""
    for (leaf, _), offset in zip(atoms, starts, strict=True):
        if type(leaf) is not Break:
            text = leaf.text  # type: ignore[union-attr]
            stripped = text.lstrip()
            if stripped:
                return offset + len(text) - len(stripped)
    return starts[-1] + 1 if starts else 0


def _inline_cuts(atoms: list[Atom], starts: list[int], first: int, bound: int, total: int) -> list[list[Cut]]:
    lines: list[Cut] = []
    sentences: list[Cut] = []
    words: list[Cut] = []
    for (leaf, _), offset in zip(atoms, starts, strict=True):
        if offset > bound:
            break
        kind = type(leaf)
        if kind is Break:
            _add_cut(lines, offset, offset + 1, first, bound, total)
            continue
        text = leaf.text  # type: ignore[union-attr]
        if kind is Text:
            for match in _SENTENCE_END.finditer(text):
                _add_cut(sentences, offset + match.start(), offset + match.end(), first, bound, total)
        for match in _SPACE.finditer(text):
            _add_cut(words, offset + match.start(), offset + match.end(), first, bound, total)
    return [lines, sentences, words]


def _add_cut(cuts: list[Cut], start: int, end: int, first: int, bound: int, total: int) -> None:
    if first < start <= bound and end < total:
        cuts.append((start, end))


def _best_cut(
    levels: Sequence[list[Cut]],
    head_size: Callable[[Cut], int],
    limit: int,
    hard: Callable[[int], int],
    first: int,
    bound: int,
    skip: Callable[[int], int],
) -> Cut | None:
    """The cut at the coarsest level that fills at least half the limit, else the fullest.
    Heads end after ``first`` (the first visible character) and by ``bound``. ``hard``
    moves a cut anywhere off a grapheme boundary; ``skip`` gives the end of the whitespace
    after it, which the cut drops so the tail does not start with it."""
    best: Cut | None = None
    best_size = -1
    for cuts in levels:
        sizes: dict[int, int] = {}

        def fits(i: int, cuts: list[Cut] = cuts, sizes: dict[int, int] = sizes) -> bool:
            sizes[i] = head_size(cuts[i])
            return sizes[i] <= limit

        i = last_fitting(len(cuts), fits)
        if i < 0:
            continue
        if sizes[i] * 2 >= limit:
            return cuts[i]
        if sizes[i] > best_size:
            best, best_size = cuts[i], sizes[i]
    # Anywhere: positions first+1..bound.
    p = last_fitting(bound - first, lambda i: head_size((first + i + 1,) * 2) <= limit)
    if p >= 0:
        position = hard(first + p + 1)
        if position != first + p + 1 and (position <= first or head_size((position, position)) > limit):
            position = first + p + 1
        if head_size((position, position)) > best_size:
            return position, skip(position)
    return best


def _flatten(nodes: Sequence[Inline], path: tuple[Styled | Link, ...], out: list[Atom]) -> None:
    for node in nodes:
        if type(node) is Styled or type(node) is Link:
            _flatten(node.children, (*path, node), out)  # type: ignore[union-attr]
        else:
            out.append((node, path))  # type: ignore[arg-type]


def _without_empty(atoms: list[Atom], starts: list[int]) -> tuple[list[Atom], list[int]]:
    """The atoms without empty text: they show nothing and fall in no slice."""
    kept = [i for i, (leaf, _) in enumerate(atoms) if type(leaf) is Break or leaf.text]  # type: ignore[union-attr]
    if len(kept) == len(atoms):
        return atoms, starts
    return [atoms[i] for i in kept], [starts[i] for i in kept]


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


def _rebuild(atoms: list[Atom], cut_links: set[int], head: bool) -> list[Inline]:
    """Inline trees from atoms, re-opening the styles and links around each.

    A link in ``cut_links`` has parts on both sides of the cut: each part is an ordinary
    link (not an autolink), and only the tail's part keeps the address for the plain text.
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
                if id(node) in cut_links:
                    copy = Link(node.href, [], "" if head else node.plain_suffix)
                else:
                    copy = Link(node.href, [], node.plain_suffix, node.auto)
            containers[-1].append(copy)
            containers.append(copy.children)
            open_path.append(node)
        containers[-1].append(leaf)
    return root
