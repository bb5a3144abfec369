"""pulldown-cmark's event stream (:mod:`.syntax`) -> the blocks of a :class:`~.ir.Document`.

One pass over the flat stream: each ``Start`` event opens a frame (:mod:`.frames`) on an
explicit stack and its ``End`` closes it, so nothing recurses however deeply the input
nests. What this adds to the grammar:

- Blocks without visible content (blank paragraphs and headings, empty code blocks and
  quotes) are dropped.
- Raw HTML is literal text: inline HTML joins the text around it, an HTML block becomes
  paragraphs of its lines. CommonMark lets such a block take in the lines after it, up to
  a blank line (or its end marker), so Markdown there shows as written.
- Links never nest (an image inside a link becomes text); a link to a script, file or data
  address stays the text it was written as (:func:`~.urls.is_allowed_link`), and so do
  single tildes (``~5~``): only two strike through.
- Structure nested deeper than :data:`~.syntax.MAX_NESTING` levels is kept as text.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from pyromark.event import Event, Range

from connectors.render.frames import (
    CELL,
    PARAGRAPH,
    PASS,
    AsWritten,
    CodeFrame,
    Container,
    FlatFrame,
    Frame,
    HeadingFrame,
    HtmlFrame,
    ImageFrame,
    ItemFrame,
    LinkFrame,
    ListFrame,
    QuoteFrame,
    RowFrame,
    StyledFrame,
    TableFrame,
)
from connectors.render.ir import Block, Break, Code, Inline, Paragraph, Rule, Style, Text
from connectors.render.nodes import strip_inlines, visible
from connectors.render.syntax import MAX_NESTING
from connectors.render.urls import is_allowed_link, normalize_link

_STYLES: dict[str, Style] = {"Emphasis": "italic", "Strong": "bold", "Strikethrough": "strike"}
# In structure kept as text, each of these starts a line of its own.
_LINES = frozenset({"Paragraph", "Heading", "Item", "TableHead", "TableRow"})
_NO_RANGE: Range = {"start": 0, "end": 0}
_NEWLINE = re.compile(b"\n")


class Builder:
    """Builds a document's blocks from its events.

    Two rare questions need source positions, which the events alone lack: whether a list
    none of whose items holds a paragraph is tight, and how a refused link was written.
    Built from plain events (:meth:`build`), such a document raises
    :class:`~.frames.NeedRanges`; build it again from ranged events (:meth:`build_ranged`)
    with the source given.
    """

    def __init__(self, source: str | None = None) -> None:
        self.root = self.container = Container()
        self.stack: list[Frame] = [self.root]
        self.out: list[Inline] = self.root.run  # where inline nodes go
        self.parts: list[str] | None = None  # where text goes instead: in code, HTML or an image
        self.flat = False  # in structure kept as text, where blocks and breaks start new lines
        self.depth = 0
        self.in_link = False
        self.data = None if source is None else source.encode()
        self.newlines = [match.start() for match in _NEWLINE.finditer(self.data or b"")]
        self.range = self.previous = _NO_RANGE  # of the current event and the one before
        # Consecutive text events go into one Text node. Its pieces are joined once, before
        # the text is first read (:meth:`finish_text`), so that many events (inline HTML,
        # single tildes) do not copy the growing text again for each one.
        self.joining: Text | None = None
        self.pieces: list[str] = []

    def build(self, events: Iterable[Event]) -> list[Block]:
        # The commonest events are handled inline: a call costs as much as the work.
        stack = self.stack
        starts = _STARTS
        for event in events:
            if type(event) is str:
                self._bare(event)
                continue
            (kind,) = event  # one key, whose value is the event's data
            value = event[kind]  # type: ignore[index]
            if kind == "Text":
                parts = self.parts
                if parts is not None:
                    parts.append(value)
                    continue
                out = self.out
                if out and type(out[-1]) is Text:
                    self.join_text(out[-1], value)  # type: ignore[arg-type]
                else:
                    out.append(Text(value))
            elif kind == "End":
                stack.pop().close(self)
            elif kind == "Start":
                if type(value) is str:
                    name, data = value, None
                else:
                    (name,) = value
                    data = value[name]
                if self.parts is None:
                    starts.get(name, _pass)(self, data)
                else:
                    self._start_in_text(name, data)
            elif kind == "Code":
                if self.parts is None:
                    self.out.append(Code(value))
                else:
                    self.parts.append(value)
            elif kind == "InlineHtml" or kind == "Html":
                self.text(value)
        self.finish_text()
        return self.root.blocks

    def build_ranged(self, events: Iterable[tuple[Event, Range]]) -> list[Block]:
        return self.build(self._ranged(events))

    def _ranged(self, events: Iterable[tuple[Event, Range]]) -> Iterator[Event]:
        for event, range_ in events:
            self.previous, self.range = self.range, range_
            yield event

    def text(self, text: str) -> None:
        parts = self.parts
        if parts is not None:
            parts.append(text)
            return
        out = self.out
        if out and type(out[-1]) is Text:
            self.join_text(out[-1], text)  # type: ignore[arg-type]
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

    def _bare(self, event: str) -> None:
        if self.parts is None:
            if event == "Rule":
                self.begin_block()
                self.add_block(Rule())
            else:
                self.out.append(Break(event == "HardBreak"))
        elif self.flat:
            self.newline()
        elif event != "Rule":
            self.parts.append(" ")

    def newline(self) -> None:
        """In structure kept as text: a line break, unless one is there already."""
        parts = self.parts
        if parts and parts[-1] != "\n":
            parts.append("\n")

    def _start_in_text(self, name: str, data: Any) -> None:
        if self.flat:
            if name in _LINES:
                self.newline()
            elif name == "TableCell" and self.parts and self.parts[-1] != "\n":
                self.parts.append(" ")
            self.stack.append(PASS)
        elif name == "Image" or name == "Link" or name == "Subscript":  # in an image's description
            _STARTS[name](self, data)
        else:
            self.stack.append(PASS)

    def begin_block(self) -> None:
        """Before a block starts in the current container (in ranged mode a list notes where
        its items' blocks lie)."""
        if self.out:
            self.flush_run()
        owner = self.container.owner
        if self.data is not None and owner is not None:
            owner.block_at(self, self.range)

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

    def line(self, offset: int) -> int:
        """The line (from 0) of a byte offset into the source."""
        return bisect_left(self.newlines, offset)

    def last_line(self, range_: Range) -> int:
        """The line of the last character of ``range_`` that is not whitespace (a block's
        range may take in the blank lines after it)."""
        start, end = range_["start"], range_["end"]
        content = self.data[start:end].rstrip()  # type: ignore[index]
        return self.line(start + len(content) - 1 if content else start)


# What each Start event opens.


def _paragraph(b: Builder, data: None) -> None:
    b.begin_block()
    owner = b.container.owner
    if owner is not None and owner.tight is None:  # a loose list shows its paragraphs
        owner.tight = False
    b.out = []
    b.stack.append(PARAGRAPH)


def _heading(b: Builder, data: dict[str, Any]) -> None:
    b.begin_block()
    b.stack.append(HeadingFrame(b, int(data["level"][1:])))


def _quote(b: Builder, data: object) -> None:
    b.begin_block()
    if b.depth >= MAX_NESTING:
        b.stack.append(FlatFrame(b, block=True))
    else:
        QuoteFrame(b)
        b.depth += 1


def _list(b: Builder, start: int | None) -> None:
    b.begin_block()
    if b.depth >= MAX_NESTING:
        b.stack.append(FlatFrame(b, block=True))
    else:
        b.stack.append(ListFrame(start))
        b.depth += 1


def _item(b: Builder, data: None) -> None:
    owner: ListFrame = b.stack[-1]  # type: ignore[assignment]
    if b.data is not None:
        owner.item_at(b, b.range)
    ItemFrame(b, owner)


def _code_block(b: Builder, kind: str | dict[str, str]) -> None:
    b.begin_block()
    b.stack.append(CodeFrame(b, kind["Fenced"] if type(kind) is dict else ""))


def _html_block(b: Builder, data: None) -> None:
    b.begin_block()
    b.stack.append(HtmlFrame(b))


def _table(b: Builder, aligns: Sequence[str]) -> None:
    b.begin_block()
    b.stack.append(FlatFrame(b, block=True) if b.depth >= MAX_NESTING else TableFrame(aligns))


def _table_head(b: Builder, data: None) -> None:
    b.stack.append(RowFrame(b.stack[-1], head=True))  # type: ignore[arg-type]


def _table_row(b: Builder, data: None) -> None:
    b.stack.append(RowFrame(b.stack[-1], head=False))  # type: ignore[arg-type]


def _table_cell(b: Builder, data: None) -> None:
    b.out = []
    b.stack.append(CELL)


def _styled(style: Style) -> Callable[[Builder, None], None]:
    def start(b: Builder, data: None) -> None:
        b.stack.append(FlatFrame(b, block=False) if b.depth >= MAX_NESTING else StyledFrame(b, style))

    return start


def _link(b: Builder, data: dict[str, Any]) -> None:
    _link_or_image(b, data, image=False)


def _image(b: Builder, data: dict[str, Any]) -> None:
    _link_or_image(b, data, image=True)


def _link_or_image(b: Builder, data: dict[str, Any], image: bool) -> None:
    if b.parts is None and b.depth >= MAX_NESTING:
        b.stack.append(FlatFrame(b, block=False))
        return
    kind = data["link_type"]
    auto = kind == "Autolink" or kind == "Email"
    href = normalize_link("mailto:" + data["dest_url"] if kind == "Email" else data["dest_url"])
    if not is_allowed_link(href):
        b.stack.append(AsWritten(b, "<" if auto else "![" if image else "[", ">" if auto else None))
    elif image:
        b.stack.append(ImageFrame(b, href))
    elif b.parts is not None:  # a link in an image's description: its label is text
        b.stack.append(PASS)
    else:
        b.stack.append(LinkFrame(b, href, auto))


def _tildes(b: Builder, data: None) -> None:
    b.stack.append(AsWritten(b, "~", "~"))


def _pass(b: Builder, data: object) -> None:
    b.stack.append(PASS)


_STARTS: dict[str, Callable[[Builder, Any], None]] = {
    "Paragraph": _paragraph,
    "Heading": _heading,
    "BlockQuote": _quote,
    "List": _list,
    "Item": _item,
    "CodeBlock": _code_block,
    "HtmlBlock": _html_block,
    "Table": _table,
    "TableHead": _table_head,
    "TableRow": _table_row,
    "TableCell": _table_cell,
    **{name: _styled(style) for name, style in _STYLES.items()},
    "Link": _link,
    "Image": _image,
    "Subscript": _tildes,
}
