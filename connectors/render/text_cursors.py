"""Cutting text: a code block at line breaks, a paragraph or heading at line breaks,
sentence ends and spaces; either anywhere (off grapheme boundaries) when nothing coarser
fits. A finer boundary wins only when the coarser one would leave the message less than
half full (:func:`~.cursor.best_cut`).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence

from connectors.render.cursor import (
    VISIBLE,
    Cursor,
    Cut,
    Finder,
    Measure,
    Step,
    best_cut,
    last_fitting,
    longest_head,
    suffix_sums,
)
from connectors.render.ir import Block, Break, Code, CodeBlock, Inline, Link, Styled, Text
from connectors.render.text import safe_cut

Atom = tuple[Text | Code | Break, tuple[Styled | Link, ...]]

_SENTENCE_END = re.compile(r"(?<=[.!?\u2026])\s+|(?<=[\u3002\uff01\uff1f])(?=\S)")
_SPACE = re.compile(r"\s+")
_PROSE: tuple[type[Text | Code], ...] = (Text,)  # where sentences end
_WORDS: tuple[type[Text | Code], ...] = (Text, Code)  # where words are cut
_SEARCH_BACK = 64  # characters before a head's end searched first for its last boundary


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
        visible = VISIBLE.search(code, pos)
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

        reach = longest_head(head_size, limit, first, bound, self.guess)
        if reach < 0:
            return None
        cut = best_cut([line], head_size, limit, lambda p: safe_cut(code, p), first, reach, skip)
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
        self.atoms = [atom for atom in atoms if type(atom[0]) is Break or atom[0].text]
        self.starts: list[int] = []
        total = 0
        for leaf, _ in self.atoms:
            self.starts.append(total)
            total += 1 if type(leaf) is Break else len(leaf.text)
        self.total = total
        self.after = suffix_sums(_atom_bounds(self.atoms))
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
        end = self.starts[i + 1] if i + 1 < len(self.starts) else self.total  # of the leaf at first
        return end - first + self.after[i + 1]

    def rest(self) -> Block:
        atoms = _slice(self.atoms, self.starts, self.pos, self.total)
        return self.make(_rebuild(atoms, self.cut_links, set()))

    def starts_blank(self) -> bool:
        if self.pos >= self.total:
            return True
        i = self._atom_at(self.pos)
        leaf = self.atoms[i][0]
        return type(leaf) is Break or leaf.text[self.pos - self.starts[i]] == "\n"

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
            return starts[i] + safe_cut(leaf.text, position - starts[i])

        def skip(position: int) -> int:
            # the whitespace (or the line break) right after a hard cut goes with the cut
            i = bisect.bisect_right(starts, position) - 1
            leaf = atoms[i][0]
            if type(leaf) is Break:
                return position + 1 if starts[i] == position and position + 1 < total else position
            text = leaf.text
            found = VISIBLE.search(text, position - starts[i])
            return starts[i] + (found.start() if found else len(text))

        levels: list[Finder] = [
            lambda reach: self._last_break(first, reach),
            lambda reach: self._last_run(_SENTENCE_END, _PROSE, first, reach),
            lambda reach: self._last_run(_SPACE, _WORDS, first, reach),
        ]
        reach = longest_head(head_size, limit, first, bound, self.guess)
        if reach < 0:
            return None
        reach = self._past_links(reach, head_size, limit, bound)
        self.guess = reach - first
        cut = best_cut(levels, head_size, limit, hard, first, reach, skip)
        if cut is None:
            return None
        children, links = self._head(cut)
        start, end = cut
        gap = "".join(
            "\n" if type(leaf) is Break else leaf.text for leaf, _ in _slice(atoms, starts, start, end)
        )
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
            reach = end + last_fitting(bound - end + 1, _fits_after(end, head_size, limit))

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
                found = VISIBLE.search(leaf.text, max(self.pos - self.starts[i], 0))
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
        self, pattern: re.Pattern[str], kinds: tuple[type[Text | Code], ...], first: int, reach: int
    ) -> Cut | None:
        """The last whitespace ``pattern`` matches in leaves of ``kinds`` after ``first`` that
        a head ending by ``reach`` can end at, with something left after it."""
        for i in range(self._atom_at(reach), -1, -1):
            offset = self.starts[i]
            leaf = self.atoms[i][0]
            if isinstance(leaf, kinds):
                text = leaf.text
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
                visible = VISIBLE.search(text, end)
                end = visible.start() if visible else len(text)
            if low <= start <= high and end < total:
                last = start, end
        # A run that the stretch starts inside of begins before it: look further back.
        if last is not None and (last[0] > begin or begin == floor or not text[begin - 1].isspace()):
            return last
        if begin == floor:
            return None
        begin = max(2 * begin - high, floor)


def _fits_after(start: int, head_size: Callable[[Cut], int], limit: int) -> Callable[[int], bool]:
    """Whether the head that ends ``i`` characters after ``start`` fits, as a function of ``i``."""

    def fits(i: int) -> bool:
        return head_size((start + i, start + i)) <= limit

    return fits


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
    sizes = [0 if type(leaf) is Break else len(leaf.text) for leaf, _ in atoms]
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


def _flatten(nodes: Sequence[Inline], path: tuple[Styled | Link, ...], out: list[Atom]) -> None:
    for node in nodes:
        if type(node) is Styled or type(node) is Link:
            _flatten(node.children, (*path, node), out)
        else:
            out.append((node, path))


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
    text = leaf.text
    a, b = max(low - offset, 0), min(high - offset, len(text))
    if a >= b:
        return None
    if a or b < len(text):
        return type(leaf)(text[a:b]), path
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
