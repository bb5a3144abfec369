"""The elements :class:`~.build.Builder` has opened and not yet closed, one frame each on
its stack. A frame collects what the events put in it and, at its ``End`` event, adds
what it made to the frame below (:meth:`Frame.close`). Frames see the builder only as the
:class:`BuildState` they are handed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pyromark.event import Range

from connectors.render.ir import (
    Align,
    Block,
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
    Text,
)
from connectors.render.nodes import (
    code_language,
    finish_link,
    literal_paragraphs,
    make_table,
    strip_inlines,
    text_inlines,
    trim_blank_lines,
    visible,
)
from connectors.render.plain import plain_inlines
from connectors.render.urls import readable_url

_ALIGNS: dict[str, Align] = {"Left": "left", "Right": "right", "Center": "center"}


class NeedRanges(Exception):
    """Building this document needs the source range of each event (see :class:`~.build.Builder`)."""


class BuildState(Protocol):
    """What frames read and change of the builder that runs them: its stack, where inline
    nodes (``out``) or collected text (``parts``) go, the container blocks go to, the
    nesting depth, and in ranged mode the source and the ranges of the last two events."""

    stack: list[Frame]
    container: Container
    out: list[Inline]
    parts: list[str] | None
    flat: bool
    depth: int
    in_link: bool
    data: bytes | None
    range: Range
    previous: Range

    def text(self, text: str) -> None: ...

    def finish_text(self) -> None: ...

    def flush_run(self) -> None: ...

    def add_block(self, block: Block) -> None: ...

    def add_paragraph(self, children: list[Inline]) -> None: ...

    def line(self, offset: int) -> int: ...

    def last_line(self, range_: Range) -> int: ...


class Frame:
    __slots__ = ()

    def close(self, b: BuildState) -> None:
        """At the element's ``End`` event (the frame is off the stack already)."""


PASS = Frame()  # an element that adds no structure: its content goes where its parent's does


class Container(Frame):
    """The document, a quote or a list item: blocks, and inline content directly in it
    (``run``: a tight list item's paragraphs come without paragraph events). A quote or
    item opens on the builder's stack as it is made."""

    __slots__ = ("blocks", "owner", "parent", "run")

    def __init__(self, b: BuildState | None = None, owner: ListFrame | None = None) -> None:
        self.blocks: list[Block] = []
        self.run: list[Inline] = []
        self.owner = owner  # the list of an item
        self.parent = None if b is None else b.container
        if b is not None:
            b.stack.append(self)
            b.container = self
            b.out = self.run

    def leave(self, b: BuildState) -> None:
        parent: Container = self.parent  # type: ignore[assignment]
        b.container = parent
        b.out = parent.run


class QuoteFrame(Container):
    __slots__ = ()

    def close(self, b: BuildState) -> None:
        self.leave(b)
        b.depth -= 1
        if self.blocks:
            b.add_block(Quote(self.blocks))


class ItemFrame(Container):
    __slots__ = ()

    def close(self, b: BuildState) -> None:
        if self.run:
            b.flush_run()
        self.leave(b)
        self.owner.items.append(ListItem(self.blocks))  # type: ignore[union-attr]


class ListFrame(Frame):
    __slots__ = ("has_table", "items", "last_line", "ordered", "spaced", "start", "tight")

    def __init__(self, start: int | None) -> None:
        self.items: list[ListItem] = []
        self.ordered = start is not None
        self.start = 1 if start is None else start
        self.tight: bool | None = None  # as long as no item showed whether it holds paragraphs
        self.spaced = False  # in ranged mode: a blank line between items, or blocks of an item
        self.last_line: int | None = None
        self.has_table = False  # directly in an item: such a list is spaced out

    def item_at(self, b: BuildState, range_: Range) -> None:
        if self.last_line is not None and b.line(range_["start"]) > self.last_line + 1:
            self.spaced = True

    def block_at(self, b: BuildState, range_: Range) -> None:
        self.item_at(b, range_)
        self.last_line = b.last_line(range_)

    def close(self, b: BuildState) -> None:
        b.depth -= 1
        if self.has_table:  # a table runs on into whatever follows it without a blank line
            tight = False
        elif self.tight is not None:
            tight = self.tight
        elif b.data is None:
            raise NeedRanges
        else:
            tight = not self.spaced
        b.add_block(ListBlock(self.items, self.ordered, self.start, tight))


class _Paragraph(Frame):
    """A paragraph: its inline nodes are the builder's ``out`` when it closes."""

    __slots__ = ()

    def close(self, b: BuildState) -> None:
        children = b.out
        b.out = b.container.run
        b.add_paragraph(children)


PARAGRAPH = _Paragraph()


class HeadingFrame(Frame):
    __slots__ = ("children", "level")

    def __init__(self, b: BuildState, level: int) -> None:
        self.level = level
        self.children: list[Inline] = []
        b.out = self.children

    def close(self, b: BuildState) -> None:
        b.finish_text()
        b.out = b.container.run
        children = strip_inlines(self.children)
        if visible(children):
            b.add_block(Heading(self.level, children))


class TableFrame(Frame):
    __slots__ = ("aligns", "header", "rows")

    def __init__(self, aligns: Sequence[str]) -> None:
        self.aligns = [_ALIGNS.get(align) for align in aligns]
        self.header: list[list[Inline]] = []
        self.rows: list[list[list[Inline]]] = []

    def close(self, b: BuildState) -> None:
        b.add_block(make_table(self.header, self.rows, self.aligns))
        if b.container.owner is not None:
            b.container.owner.has_table = True


class RowFrame(Frame):
    __slots__ = ("cells", "head", "table")

    def __init__(self, table: TableFrame, head: bool) -> None:
        self.table = table
        self.head = head
        self.cells: list[list[Inline]] = []

    def close(self, b: BuildState) -> None:
        if self.head:
            self.table.header = self.cells
        else:
            self.table.rows.append(self.cells)


class _Cell(Frame):
    """A table cell: its inline nodes are the builder's ``out`` when it closes, and the row
    it belongs to is the frame below."""

    __slots__ = ()

    def close(self, b: BuildState) -> None:
        b.finish_text()
        b.stack[-1].cells.append(strip_inlines(b.out))  # type: ignore[attr-defined]
        b.out = b.container.run


CELL = _Cell()


class StyledFrame(Frame):
    __slots__ = ("children", "parent", "style")

    def __init__(self, b: BuildState, style: Style) -> None:
        self.style = style
        self.parent = b.out
        self.children: list[Inline] = []
        b.out = self.children
        b.depth += 1

    def close(self, b: BuildState) -> None:
        b.out = self.parent
        b.depth -= 1
        if self.children:
            self.parent.append(Styled(self.style, self.children))
        # else dropped: an empty span would not render


class LinkFrame(Frame):
    __slots__ = ("link", "parent")

    def __init__(self, b: BuildState, href: str, auto: bool) -> None:
        self.link = Link(href, [], auto=auto)
        self.parent = b.out
        b.out = self.link.children
        b.depth += 1
        b.in_link = True

    def close(self, b: BuildState) -> None:
        b.finish_text()
        b.out = self.parent
        b.depth -= 1
        b.in_link = False
        link = self.link
        if link.auto:  # the address as written, its escapes decoded like a label's
            link.children = [Text(readable_url(plain_inlines(link.children)))]
        finish_link(link)
        self.parent.append(link)


class AsWritten(Frame):
    """Markup shown as the text it was written as, what it encloses parsed as usual: a link
    or image whose address is refused, or single tildes. ``tail`` is what follows the
    enclosed part; ``None`` to read it from the source."""

    __slots__ = ("opening", "start", "tail")

    def __init__(self, b: BuildState, opening: str, tail: str | None) -> None:
        if tail is None and b.data is None:
            raise NeedRanges
        self.opening = opening
        self.start = b.range
        self.tail = tail
        b.text(opening)

    def close(self, b: BuildState) -> None:
        tail = self.tail
        if tail is None:
            start, end = self.start["start"], self.start["end"]
            label_end = start + len(self.opening) if b.previous is self.start else b.previous["end"]
            tail = b.data[label_end:end].decode("utf-8", "replace")  # type: ignore[index]
        b.text(tail)


class Collect(Frame):
    """An element whose content is collected as text."""

    __slots__ = ("parts", "saved_flat", "saved_parts")

    def __init__(self, b: BuildState, flat: bool = False) -> None:
        self.parts: list[str] = []
        self.saved_parts, self.saved_flat = b.parts, b.flat
        b.parts, b.flat = self.parts, flat

    def collected(self, b: BuildState) -> str:
        b.parts, b.flat = self.saved_parts, self.saved_flat
        return "".join(self.parts)


class CodeFrame(Collect):
    __slots__ = ("info",)

    def __init__(self, b: BuildState, info: str) -> None:
        super().__init__(b)
        self.info = info

    def close(self, b: BuildState) -> None:
        code = trim_blank_lines(self.collected(b))
        if code:
            b.add_block(CodeBlock(code, code_language(self.info)))


class HtmlFrame(Collect):
    __slots__ = ()

    def close(self, b: BuildState) -> None:
        for paragraph in literal_paragraphs(self.collected(b)):
            b.add_block(paragraph)


class ImageFrame(Collect):
    """An image: its description is collected as text, the alt text."""

    __slots__ = ("href", "nested")

    def __init__(self, b: BuildState, href: str) -> None:
        self.href = href
        self.nested = b.parts is not None  # in another image's description
        super().__init__(b)

    def close(self, b: BuildState) -> None:
        alt = self.collected(b).strip()
        if self.nested:
            b.parts.append(alt)  # type: ignore[union-attr]
        elif b.in_link:
            b.out.append(Text(alt or self.href))
        else:
            link = Link(self.href, [Text(alt)] if alt else [])
            finish_link(link)
            b.out.append(link)


class FlatFrame(Collect):
    """Structure nested too deep, kept as text: a paragraph of its lines (``block``), or
    text on one line."""

    __slots__ = ("block",)

    def __init__(self, b: BuildState, block: bool) -> None:
        super().__init__(b, flat=True)
        self.block = block

    def close(self, b: BuildState) -> None:
        text = self.collected(b).strip("\n")
        if not self.block:
            b.out.append(Text(text.replace("\n", " ")))
        elif text.strip():
            b.add_block(Paragraph(text_inlines(text)))
