"""The elements :mod:`.build` has opened and not yet closed, one frame each on the
stack of a :class:`BuildContext`. A frame collects what the events put in it and, at its
``End`` event, adds what it made to the frame below (:meth:`Frame.close`). Frames see one
build only as the context they are handed: the state they read and change is all in it."""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

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
_NO_RANGE: Range = {"start": 0, "end": 0}
_NEWLINE = re.compile(b"\n")
_F = TypeVar("_F", bound="Frame")


class NeedRanges(Exception):
    """Building this document needs the source range of each event (see :func:`~.build.build`)."""


class Source:
    """The text of a ranged build, for the two questions events alone cannot answer: its
    UTF-8 bytes, where their lines break, and the ranges of the current event and the one
    before it (the builder sets both as it reads each event)."""

    __slots__ = ("data", "newlines", "previous", "range")

    def __init__(self, text: str) -> None:
        self.data = text.encode()
        self.newlines = [match.start() for match in _NEWLINE.finditer(self.data)]
        self.range = self.previous = _NO_RANGE

    def line(self, offset: int) -> int:
        """The line (from 0) of a byte offset."""
        return bisect_left(self.newlines, offset)

    def last_line(self, range_: Range) -> int:
        """The line of the last character of ``range_`` that is not whitespace (a block's
        range may take in the blank lines after it)."""
        start, end = range_["start"], range_["end"]
        content = self.data[start:end].rstrip()
        return self.line(start + len(content) - 1 if content else start)

    def text(self, start: int, end: int) -> str:
        """The source between two byte offsets."""
        return self.data[start:end].decode("utf-8", "replace")


@dataclass(slots=True, eq=False)
class BuildContext:
    """The state of one build, handed to every frame as it opens and closes.

    Attributes:
        stack (list[Frame]): The open frames, innermost last; the document at the bottom.
        container (Container): The document, quote or list item that blocks go to.
        out (list[Inline]): Where inline nodes go.
        source (Source | None): In a ranged build, the source and the events' ranges.
        parts (list[str] | None): Where text goes instead, while it is collected (code,
            raw HTML, an image's description, structure kept as text); else ``None``.
        flat (bool): In structure kept as text, where blocks and breaks start new lines.
        depth (int): How deeply quotes, lists, spans and links nest here.
        in_link (bool): Inside a link's label (an image there shows as its alt text).
    """

    stack: list[Frame]
    container: Container
    out: list[Inline]
    source: Source | None = None
    parts: list[str] | None = None
    flat: bool = False
    depth: int = 0
    in_link: bool = False
    # Consecutive text events go into one Text node. Its pieces are joined once, before
    # the text is first read (:meth:`finish_text`), so that many events (inline HTML,
    # single tildes) do not copy the growing text again for each one.
    joining: Text | None = None
    pieces: list[str] = field(default_factory=list)

    def text(self, text: str) -> None:
        parts = self.parts
        if parts is not None:
            parts.append(text)
            return
        out = self.out
        if out and type(last := out[-1]) is Text:
            self.join_text(last, text)
        elif text:
            out.append(Text(text))

    def join_text(self, node: Text, text: str) -> None:
        """Add ``text`` to the end of ``node``, the last inline node so far."""
        if node is not self.joining:
            self.finish_text()
            self.joining = node
            self.pieces = [node.text]
        self.pieces.append(text)

    def finish_text(self) -> None:
        """Give the Text node being joined its whole text. Called before inline nodes are
        read: when a paragraph, heading, table cell or link closes."""
        if self.joining is not None:
            self.joining.text = "".join(self.pieces)
            self.joining = None
            self.pieces = []

    def flush_run(self) -> None:
        """Inline content directly in a container (a tight list item's) becomes a paragraph."""
        run = self.out
        if run:
            container = self.container
            container.run = self.out = []
            if container.owner is not None and container.owner.tight is None:
                container.owner.tight = True
            self.add_paragraph(run)

    def add_block(self, block: Block) -> None:
        self.container.blocks.append(block)

    def add_paragraph(self, children: list[Inline]) -> None:
        self.finish_text()
        children = strip_inlines(children)
        if visible(children):
            self.container.blocks.append(Paragraph(children))

    def innermost(self, kind: type[_F]) -> _F:
        """The innermost open frame, which the grammar makes a ``kind``: the list an item
        opens or closes in, the table a row opens in, the row a cell closes in."""
        frame = self.stack[-1]
        if not isinstance(frame, kind):
            raise TypeError(f"a {kind.__name__} is expected, {type(frame).__name__} is open")
        return frame


class Frame:
    __slots__ = ()

    def close(self, ctx: BuildContext) -> None:
        """At the element's ``End`` event (the frame is off the stack already)."""


PASS = Frame()  # an element that adds no structure: its content goes where its parent's does


class Container(Frame):
    """The document, or (as a :class:`Nested` one) a quote or list item: blocks, and inline
    content directly in it (``run``: a tight list item's paragraphs come without paragraph
    events)."""

    __slots__ = ("blocks", "owner", "run")

    def __init__(self, owner: ListFrame | None = None) -> None:
        self.blocks: list[Block] = []
        self.run: list[Inline] = []
        self.owner = owner  # the list of an item


class Nested(Container):
    """A quote or list item: it opens on the stack as it is made and, closing, gives the
    container around it back its place."""

    __slots__ = ("parent",)

    def __init__(self, ctx: BuildContext, owner: ListFrame | None = None) -> None:
        super().__init__(owner)
        self.parent = ctx.container
        ctx.stack.append(self)
        ctx.container = self
        ctx.out = self.run

    def leave(self, ctx: BuildContext) -> None:
        ctx.container = self.parent
        ctx.out = self.parent.run


class QuoteFrame(Nested):
    __slots__ = ()

    def close(self, ctx: BuildContext) -> None:
        self.leave(ctx)
        ctx.depth -= 1
        if self.blocks:
            ctx.add_block(Quote(self.blocks))


class ItemFrame(Nested):
    __slots__ = ()

    def close(self, ctx: BuildContext) -> None:
        if self.run:
            ctx.flush_run()
        self.leave(ctx)
        ctx.innermost(ListFrame).items.append(ListItem(self.blocks))


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

    def item_at(self, source: Source) -> None:
        """An item starts at the current event."""
        if self.last_line is not None and source.line(source.range["start"]) > self.last_line + 1:
            self.spaced = True

    def block_at(self, source: Source) -> None:
        """A block of an item starts at the current event."""
        self.item_at(source)
        self.last_line = source.last_line(source.range)

    def close(self, ctx: BuildContext) -> None:
        ctx.depth -= 1
        if self.has_table:  # a table runs on into whatever follows it without a blank line
            tight = False
        elif self.tight is not None:
            tight = self.tight
        elif ctx.source is None:
            raise NeedRanges
        else:
            tight = not self.spaced
        ctx.add_block(ListBlock(self.items, self.ordered, self.start, tight))


class _Paragraph(Frame):
    """A paragraph: its inline nodes are the builder's ``out`` when it closes."""

    __slots__ = ()

    def close(self, ctx: BuildContext) -> None:
        children = ctx.out
        ctx.out = ctx.container.run
        ctx.add_paragraph(children)


PARAGRAPH = _Paragraph()


class HeadingFrame(Frame):
    __slots__ = ("children", "level")

    def __init__(self, ctx: BuildContext, level: int) -> None:
        self.level = level
        self.children: list[Inline] = []
        ctx.out = self.children

    def close(self, ctx: BuildContext) -> None:
        ctx.finish_text()
        ctx.out = ctx.container.run
        children = strip_inlines(self.children)
        if visible(children):
            ctx.add_block(Heading(self.level, children))


class TableFrame(Frame):
    __slots__ = ("aligns", "header", "rows")

    def __init__(self, aligns: Sequence[str]) -> None:
        self.aligns = [_ALIGNS.get(align) for align in aligns]
        self.header: list[list[Inline]] = []
        self.rows: list[list[list[Inline]]] = []

    def close(self, ctx: BuildContext) -> None:
        ctx.add_block(make_table(self.header, self.rows, self.aligns))
        if ctx.container.owner is not None:
            ctx.container.owner.has_table = True


class RowFrame(Frame):
    __slots__ = ("cells", "head", "table")

    def __init__(self, table: TableFrame, head: bool) -> None:
        self.table = table
        self.head = head
        self.cells: list[list[Inline]] = []

    def close(self, ctx: BuildContext) -> None:
        if self.head:
            self.table.header = self.cells
        else:
            self.table.rows.append(self.cells)


class _Cell(Frame):
    """A table cell: its inline nodes are the builder's ``out`` when it closes, and the row
    it belongs to is the frame below."""

    __slots__ = ()

    def close(self, ctx: BuildContext) -> None:
        ctx.finish_text()
        ctx.innermost(RowFrame).cells.append(strip_inlines(ctx.out))
        ctx.out = ctx.container.run


CELL = _Cell()


class StyledFrame(Frame):
    __slots__ = ("children", "parent", "style")

    def __init__(self, ctx: BuildContext, style: Style) -> None:
        self.style = style
        self.parent = ctx.out
        self.children: list[Inline] = []
        ctx.out = self.children
        ctx.depth += 1

    def close(self, ctx: BuildContext) -> None:
        ctx.out = self.parent
        ctx.depth -= 1
        if self.children:
            self.parent.append(Styled(self.style, self.children))
        # else dropped: an empty span would not render


class LinkFrame(Frame):
    __slots__ = ("link", "parent")

    def __init__(self, ctx: BuildContext, href: str, auto: bool) -> None:
        self.link = Link(href, [], auto=auto)
        self.parent = ctx.out
        ctx.out = self.link.children
        ctx.depth += 1
        ctx.in_link = True

    def close(self, ctx: BuildContext) -> None:
        ctx.finish_text()
        ctx.out = self.parent
        ctx.depth -= 1
        ctx.in_link = False
        link = self.link
        if link.auto:  # the address as written, its escapes decoded like a label's
            link.children = [Text(readable_url(plain_inlines(link.children)))]
        finish_link(link)
        self.parent.append(link)


class AsWritten(Frame):
    """Markup shown as the text it was written as, what it encloses parsed as usual: single
    tildes, or an autolink whose address is refused."""

    __slots__ = ("tail",)

    def __init__(self, ctx: BuildContext, opening: str, tail: str) -> None:
        self.tail = tail
        ctx.text(opening)

    def close(self, ctx: BuildContext) -> None:
        ctx.text(self.tail)


class LinkAsWritten(Frame):
    """A link or image whose address is refused, shown as written: its opening bracket,
    its label parsed as usual, and what follows the label (an address and title, or a
    reference) read from the source."""

    __slots__ = ("opening", "source", "start")

    def __init__(self, ctx: BuildContext, opening: str) -> None:
        if ctx.source is None:
            raise NeedRanges
        self.source = ctx.source
        self.start = ctx.source.range
        self.opening = opening
        ctx.text(opening)

    def close(self, ctx: BuildContext) -> None:
        start, end = self.start["start"], self.start["end"]
        previous = self.source.previous  # the label's last event, or this one's start if none
        label_end = start + len(self.opening) if previous is self.start else previous["end"]
        ctx.text(self.source.text(label_end, end))


class Collect(Frame):
    """An element whose content is collected as text."""

    __slots__ = ("parts", "saved_flat", "saved_parts")

    def __init__(self, ctx: BuildContext, flat: bool = False) -> None:
        self.parts: list[str] = []
        self.saved_parts, self.saved_flat = ctx.parts, ctx.flat
        ctx.parts, ctx.flat = self.parts, flat

    def collected(self, ctx: BuildContext) -> str:
        ctx.parts, ctx.flat = self.saved_parts, self.saved_flat
        return "".join(self.parts)


class CodeFrame(Collect):
    __slots__ = ("info",)

    def __init__(self, ctx: BuildContext, info: str) -> None:
        super().__init__(ctx)
        self.info = info

    def close(self, ctx: BuildContext) -> None:
        code = trim_blank_lines(self.collected(ctx))
        if code:
            ctx.add_block(CodeBlock(code, code_language(self.info)))


class HtmlFrame(Collect):
    __slots__ = ()

    def close(self, ctx: BuildContext) -> None:
        for paragraph in literal_paragraphs(self.collected(ctx)):
            ctx.add_block(paragraph)


class ImageFrame(Collect):
    """An image: its description is collected as text, the alt text."""

    __slots__ = ("href",)

    def __init__(self, ctx: BuildContext, href: str) -> None:
        self.href = href
        super().__init__(ctx)

    def close(self, ctx: BuildContext) -> None:
        alt = self.collected(ctx).strip()
        outer = ctx.parts  # set again when this image is in another one's description
        if outer is not None:
            outer.append(alt)
        elif ctx.in_link:
            ctx.out.append(Text(alt or self.href))
        else:
            link = Link(self.href, [Text(alt)] if alt else [])
            finish_link(link)
            ctx.out.append(link)


class FlatFrame(Collect):
    """Structure nested too deep, kept as text: a paragraph of its lines (``block``), or
    text on one line."""

    __slots__ = ("block",)

    def __init__(self, ctx: BuildContext, block: bool) -> None:
        super().__init__(ctx, flat=True)
        self.block = block

    def close(self, ctx: BuildContext) -> None:
        text = self.collected(ctx).strip("\n")
        if not self.block:
            ctx.out.append(Text(text.replace("\n", " ")))
        elif text.strip():
            ctx.add_block(Paragraph(text_inlines(text)))
