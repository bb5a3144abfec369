"""pulldown-cmark's event stream (:mod:`.syntax`) -> the blocks of a :class:`~.ir.Document`.

One pass over the flat stream: each ``Start`` event opens a frame (:mod:`.frames`) on an
explicit stack and its ``End`` closes it, so nothing recurses however deeply the input
nests. The state of a build (that stack, where blocks, inline nodes or text go, the depth)
is one :class:`~.frames.BuildContext`, handed to every frame. What this adds to the grammar:

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

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, cast

from pyromark.event import Event, Range

from connectors.render.frames import (
    CELL,
    PARAGRAPH,
    PASS,
    AsWritten,
    BuildContext,
    CodeFrame,
    Container,
    FlatFrame,
    HeadingFrame,
    HtmlFrame,
    ImageFrame,
    ItemFrame,
    LinkAsWritten,
    LinkFrame,
    ListFrame,
    QuoteFrame,
    RowFrame,
    Source,
    StyledFrame,
    TableFrame,
)
from connectors.render.ir import Block, Break, Code, Rule, Style, Text
from connectors.render.syntax import MAX_NESTING
from connectors.render.urls import is_allowed_link, normalize_link

_STYLES: dict[str, Style] = {"Emphasis": "italic", "Strong": "bold", "Strikethrough": "strike"}
# In structure kept as text, each of these starts a line of its own.
_LINES = frozenset({"Paragraph", "Heading", "Item", "TableHead", "TableRow"})

# An event as the loop reads it: a bare name, or a dict of one key (the event's kind)
# whose value is the event's data. pyromark types the dicts as a union of one TypedDict
# per kind, which the type checker cannot narrow by a key read at run time; plain dicts
# is what they are.
_Event = str | dict[str, Any]


def build(events: Iterable[Event]) -> list[Block]:
    """The blocks of the document ``events`` were parsed into.

    Two rare questions need source positions, which the events alone lack: whether a list
    none of whose items holds a paragraph is tight, and how a refused link was written.
    Such a document raises :class:`~.frames.NeedRanges`; build it again with
    :func:`build_ranged`."""
    return _build(events, None)


def build_ranged(source: str, events: Iterable[tuple[Event, Range]]) -> list[Block]:
    """The blocks of the document parsed from ``source`` into ``events``, each with its
    byte range in the source."""
    positions = Source(source)
    return _build(_ranged(positions, events), positions)


def _ranged(source: Source, events: Iterable[tuple[Event, Range]]) -> Iterator[Event]:
    for event, range_ in events:
        source.previous, source.range = source.range, range_
        yield event


def _build(events: Iterable[Event], source: Source | None) -> list[Block]:
    root = Container()
    ctx = BuildContext([root], root, root.run, source)
    stack = ctx.stack
    starts = _STARTS
    # The commonest events are handled inline: a call costs as much as the work.
    for event in cast("Iterable[_Event]", events):
        if type(event) is not dict:
            _bare(ctx, event)
            continue
        (kind,) = event
        value = event[kind]
        if kind == "Text":
            parts = ctx.parts
            if parts is not None:
                parts.append(value)
                continue
            out = ctx.out
            if out and type(last := out[-1]) is Text:
                ctx.join_text(last, value)
            else:
                out.append(Text(value))
        elif kind == "End":
            stack.pop().close(ctx)
        elif kind == "Start":
            if type(value) is str:
                name, data = value, None
            else:
                (name,) = value
                data = value[name]
            parts = ctx.parts
            if parts is None:
                starts.get(name, _pass)(ctx, data)
            else:
                _start_in_text(ctx, parts, name, data)
        elif kind == "Code":
            if ctx.parts is None:
                ctx.out.append(Code(value))
            else:
                ctx.parts.append(value)
        elif kind == "InlineHtml" or kind == "Html":
            ctx.text(value)
    ctx.finish_text()
    return root.blocks


def _bare(ctx: BuildContext, event: object) -> None:
    """One of the events that are a bare name: ``"SoftBreak"``, ``"HardBreak"`` or ``"Rule"``."""
    parts = ctx.parts
    if parts is None:
        if event == "Rule":
            _begin_block(ctx)
            ctx.add_block(Rule())
        else:
            ctx.out.append(Break(event == "HardBreak"))
    elif ctx.flat:
        _newline(parts)
    elif event != "Rule":
        parts.append(" ")


def _newline(parts: list[str]) -> None:
    """In structure kept as text: a line break, unless one is there already."""
    if parts and parts[-1] != "\n":
        parts.append("\n")


def _start_in_text(ctx: BuildContext, parts: list[str], name: str, data: Any) -> None:
    """An element starting while text is collected into ``parts``."""
    if ctx.flat:
        if name in _LINES:
            _newline(parts)
        elif name == "TableCell" and parts and parts[-1] != "\n":
            parts.append(" ")
        ctx.stack.append(PASS)
    elif name == "Image" or name == "Link" or name == "Subscript":  # in an image's description
        _STARTS[name](ctx, data)
    else:
        ctx.stack.append(PASS)


def _begin_block(ctx: BuildContext) -> None:
    """Before a block starts in the current container (in ranged mode a list notes where
    its items' blocks lie)."""
    if ctx.out:
        ctx.flush_run()
    owner = ctx.container.owner
    if ctx.source is not None and owner is not None:
        owner.block_at(ctx.source)


# What each Start event opens.


def _paragraph(ctx: BuildContext, data: None) -> None:
    _begin_block(ctx)
    owner = ctx.container.owner
    if owner is not None and owner.tight is None:  # a loose list shows its paragraphs
        owner.tight = False
    ctx.out = []
    ctx.stack.append(PARAGRAPH)


def _heading(ctx: BuildContext, data: dict[str, Any]) -> None:
    _begin_block(ctx)
    ctx.stack.append(HeadingFrame(ctx, int(data["level"][1:])))


def _quote(ctx: BuildContext, data: object) -> None:
    _begin_block(ctx)
    if ctx.depth >= MAX_NESTING:
        ctx.stack.append(FlatFrame(ctx, block=True))
    else:
        QuoteFrame(ctx)
        ctx.depth += 1


def _list(ctx: BuildContext, start: int | None) -> None:
    _begin_block(ctx)
    if ctx.depth >= MAX_NESTING:
        ctx.stack.append(FlatFrame(ctx, block=True))
    else:
        ctx.stack.append(ListFrame(start))
        ctx.depth += 1


def _item(ctx: BuildContext, data: None) -> None:
    owner = ctx.innermost(ListFrame)
    if ctx.source is not None:
        owner.item_at(ctx.source)
    ItemFrame(ctx, owner)


def _code_block(ctx: BuildContext, kind: str | dict[str, str]) -> None:
    _begin_block(ctx)
    ctx.stack.append(CodeFrame(ctx, kind["Fenced"] if type(kind) is dict else ""))


def _html_block(ctx: BuildContext, data: None) -> None:
    _begin_block(ctx)
    ctx.stack.append(HtmlFrame(ctx))


def _table(ctx: BuildContext, aligns: Sequence[str]) -> None:
    _begin_block(ctx)
    ctx.stack.append(FlatFrame(ctx, block=True) if ctx.depth >= MAX_NESTING else TableFrame(aligns))


def _table_head(ctx: BuildContext, data: None) -> None:
    ctx.stack.append(RowFrame(ctx.innermost(TableFrame), head=True))


def _table_row(ctx: BuildContext, data: None) -> None:
    ctx.stack.append(RowFrame(ctx.innermost(TableFrame), head=False))


def _table_cell(ctx: BuildContext, data: None) -> None:
    ctx.out = []
    ctx.stack.append(CELL)


def _styled(style: Style) -> Callable[[BuildContext, None], None]:
    def start(ctx: BuildContext, data: None) -> None:
        ctx.stack.append(FlatFrame(ctx, block=False) if ctx.depth >= MAX_NESTING else StyledFrame(ctx, style))

    return start


def _link(ctx: BuildContext, data: dict[str, Any]) -> None:
    _link_or_image(ctx, data, image=False)


def _image(ctx: BuildContext, data: dict[str, Any]) -> None:
    _link_or_image(ctx, data, image=True)


def _link_or_image(ctx: BuildContext, data: dict[str, Any], image: bool) -> None:
    if ctx.parts is None and ctx.depth >= MAX_NESTING:
        ctx.stack.append(FlatFrame(ctx, block=False))
        return
    kind = data["link_type"]
    auto = kind == "Autolink" or kind == "Email"
    href = normalize_link("mailto:" + data["dest_url"] if kind == "Email" else data["dest_url"])
    if not is_allowed_link(href):
        ctx.stack.append(AsWritten(ctx, "<", ">") if auto else LinkAsWritten(ctx, "![" if image else "["))
    elif image:
        ctx.stack.append(ImageFrame(ctx, href))
    elif ctx.parts is not None:  # a link in an image's description: its label is text
        ctx.stack.append(PASS)
    else:
        ctx.stack.append(LinkFrame(ctx, href, auto))


def _tildes(ctx: BuildContext, data: None) -> None:
    ctx.stack.append(AsWritten(ctx, "~", "~"))


def _pass(ctx: BuildContext, data: object) -> None:
    ctx.stack.append(PASS)


_STARTS: dict[str, Callable[[BuildContext, Any], None]] = {
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
