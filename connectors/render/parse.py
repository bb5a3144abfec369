"""Markdown -> :class:`~connectors.render.ir.Document`, from the markdown-it-pyrs syntax tree.

CommonMark plus GitHub tables and strikethrough (:mod:`.syntax`). Raw HTML is not parsed, so
a model's ``<b>`` or ``<script>`` arrives as literal text and every renderer escapes it.

Reading a node's name, children or data copies it out of the parser, so each is read
once. Structure nested deeper than :data:`~.syntax.MAX_NESTING` levels is kept as text.
"""

from __future__ import annotations

from collections.abc import Sequence

from markdown_it_pyrs import Node

from connectors.render.ir import (
    Align,
    Block,
    Break,
    Code,
    CodeBlock,
    Document,
    Heading,
    Inline,
    Link,
    ListBlock,
    ListItem,
    Paragraph,
    Quote,
    Rule,
    Styled,
    Table,
    Text,
)
from connectors.render.plain import plain_inlines
from connectors.render.syntax import MAX_NESTING, syntax_tree, take_apart
from connectors.render.table import layout_lines
from connectors.render.text import display_width
from connectors.render.urls import ascii_web_host, readable_url

_STYLES = {"em": "italic", "strong": "bold", "strikethrough": "strike"}
_BLOCKS = frozenset(
    {
        *("paragraph", "heading", "lheading", "code_block", "fence", "bullet_list", "ordered_list"),
        *("blockquote", "hr", "table", "definition"),
    }
)
_LANG_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+#.-")
_ALIGNS: dict[str, Align] = {"left": "left", "right": "right", "center": "center"}
# What markdown-it trims around a paragraph, heading or cell: JavaScript's trim() less U+FEFF.
_TRIM = (
    "\t\n\x0b\x0c\r \xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)


def parse(markdown: str) -> Document:
    """Parse ``markdown`` into a :class:`Document`. Blocks without visible content (blank
    paragraphs and headings, empty code blocks and quotes) are dropped."""
    root, source = syntax_tree(markdown)
    return Document(_blocks(root.children, source, 0))


def _blocks(nodes: Sequence[Node], source: str, depth: int) -> list[Block]:
    """Blocks from block nodes. Inline nodes among them are the paragraphs of a tight list
    item, which the parser unwraps."""
    blocks: list[Block] = []
    run: list[Node] = []
    for node in nodes:
        name = node.name
        if name not in _BLOCKS:
            run.append(node)
            continue
        if run:
            _add_paragraph(blocks, run, depth)
            run = []
        if name == "paragraph":
            _add_paragraph(blocks, node.children, depth)
        elif name == "heading" or name == "lheading":
            children = _strip(_inlines(node.children, False, depth))
            if _visible(children):
                blocks.append(Heading(node.meta["level"], children))
        elif name == "fence" or name == "code_block":
            meta = node.meta
            code = _trim_blank_lines(meta["content"])
            if code:
                blocks.append(CodeBlock(code, _lang(meta.get("info", ""))))
        elif depth >= MAX_NESTING and name != "hr" and name != "definition":
            _add_paragraph_text(blocks, take_apart([node]))
        elif name == "bullet_list" or name == "ordered_list":
            blocks.append(_list(node, name == "ordered_list", source, depth + 1))
        elif name == "blockquote":
            inner = _blocks(node.children, source, depth + 1)
            if inner:
                blocks.append(Quote(inner))
        elif name == "table":
            blocks.append(_table(node, depth))
        elif name == "hr":
            blocks.append(Rule())
    if run:
        _add_paragraph(blocks, run, depth)
    return blocks


def _add_paragraph(blocks: list[Block], nodes: Sequence[Node], depth: int) -> None:
    children = _strip(_inlines(nodes, False, depth))
    if _visible(children):
        blocks.append(Paragraph(children))


def _add_paragraph_text(blocks: list[Block], text: str) -> None:
    if text.strip():
        blocks.append(Paragraph(text_inlines(text)))


def _strip(children: list[Inline]) -> list[Inline]:
    """Without the whitespace around the content (line breaks after or before it included):
    the parser trims spaces and tabs only, the markdown-it grammar all of :data:`_TRIM`."""
    if not children:
        return children
    head, tail = children[0], children[-1]
    if (
        (type(head) is not Text or head.text[:1] not in _TRIM)  # type: ignore[union-attr]
        and type(tail) is not Break
        and (type(tail) is not Text or tail.text[-1:] not in _TRIM)  # type: ignore[union-attr]
    ):
        return children  # the common case: nothing to strip
    first, last = 0, len(children)
    while first < last and _blank(children[first]):
        first += 1
        while first < last and type(children[first]) is Break:
            first += 1
    while last > first and (type(children[last - 1]) is Break or _blank(children[last - 1])):
        last -= 1
    children = children[first:last]
    if children and type(children[0]) is Text:
        children[0] = Text(children[0].text.lstrip(_TRIM))  # type: ignore[union-attr]
    if children and type(children[-1]) is Text:
        children[-1] = Text(children[-1].text.rstrip(_TRIM))  # type: ignore[union-attr]
    return children


def _blank(node: Inline) -> bool:
    return type(node) is Text and not node.text.strip(_TRIM)  # type: ignore[union-attr]


def _visible(nodes: Sequence[Inline]) -> bool:
    """Whether the plain text of ``nodes`` shows anything but whitespace."""
    for node in nodes:
        kind = type(node)
        if kind is Text or kind is Code:
            if node.text and not node.text.isspace():  # type: ignore[union-attr]
                return True
        elif kind is not Break and _visible(node.children):  # type: ignore[union-attr]
            return True
    return False


# Lists.


def _list(node: Node, ordered: bool, source: str, depth: int) -> ListBlock:
    item_nodes = node.children
    items = [ListItem(_blocks(item.children, source, depth)) for item in item_nodes]
    start = node.meta["start"] if ordered else 1
    # A table runs on into whatever follows it without a blank line: space such lists out.
    has_table = any(type(b) is Table for item in items for b in item.blocks)
    tight = not has_table and _tight(item_nodes, source)
    return ListBlock(items, ordered, start, tight)


def _tight(items: Sequence[Node], source: str) -> bool:
    """Whether a list is tight. The parser unwraps the paragraphs of a tight list and keeps
    those of a loose one; a list without paragraphs is loose when a blank line separates
    its items or two blocks of an item."""
    for item in items:
        for child in item.children:
            name = child.name
            if name == "paragraph":
                return False
            if name not in _BLOCKS:
                return True
    data = source.encode()  # source maps count UTF-8 bytes
    last_end: int | None = None
    for item in items:
        start, _ = item.srcmap or (0, 0)
        if last_end is not None and data.count(b"\n", 0, start) > last_end + 1:
            return False
        for child in item.children:
            if child.name == "definition":  # shows nothing
                continue
            start, end = child.srcmap or (0, 0)
            if last_end is not None and data.count(b"\n", 0, start) > last_end + 1:
                return False
            last_end = _last_line(data, start, end)
    return True


def _last_line(data: bytes, start: int, end: int) -> int:
    """The line of the last character of ``data[start:end]`` that is not whitespace (a block's
    source map may take in the blank lines after it)."""
    content = data[start:end].rstrip()
    return data.count(b"\n", 0, start + len(content) - 1 if content else start)


# Tables.


def _table(node: Node, depth: int) -> Table:
    header: list[list[Inline]] = []
    rows: list[list[list[Inline]]] = []
    for section in node.children:
        in_head = section.name == "thead"
        for row in section.children:
            cells = [_strip(_inlines(cell.children, False, depth)) for cell in row.children]
            if in_head:
                header = cells
            else:
                rows.append(cells)
    aligns = [_ALIGNS.get(align) for align in node.meta["alignments"]]
    return make_table(header, rows, aligns)


def make_table(header: list[list[Inline]], rows: list[list[list[Inline]]], aligns: list[Align]) -> Table:
    """A table from its cells, padded to the same number of columns, with its plain text,
    column widths and layout fixed."""
    columns = max([len(header), *(len(r) for r in rows)])
    aligns = aligns + [None] * (columns - len(aligns))
    header += [[] for _ in range(columns - len(header))]
    for r in rows:
        r += [[] for _ in range(columns - len(r))]
    header_plain = [_cell_text(plain_inlines(c)) for c in header]
    rows_plain = [[_cell_text(plain_inlines(c)) for c in r] for r in rows]
    widths = [
        max([3, display_width(header_plain[col]), *(display_width(r[col]) for r in rows_plain)])
        for col in range(columns)
    ]
    lines = layout_lines(header_plain, rows_plain, widths, aligns)
    return Table(header, rows, aligns, widths, header_plain, rows_plain, lines)


def _cell_text(text: str) -> str:
    return text.replace("\n", " ") if "\n" in text else text


# Inline content.


def _inlines(nodes: Sequence[Node], in_link: bool, depth: int) -> list[Inline]:
    """Inline nodes of the syntax tree -> inline nodes. Links never nest: an image inside a
    link becomes text. Styled spans and links left without content are dropped."""
    out: list[Inline] = []
    joins = False  # whether text may join the last node (not across a dropped span)
    for node in nodes:
        name = node.name
        if name == "text" or name == "text_special":
            text = node.meta["content"]
            if not text:
                continue
            if joins and type(out[-1]) is Text:
                out[-1] = Text(out[-1].text + text)  # type: ignore[union-attr]
            else:
                out.append(Text(text))
        elif name == "softbreak":
            out.append(Break(False))
        elif name == "code_inline":
            out.append(Code(_content(node.children)))
        elif name == "hardbreak":
            out.append(Break(True))
        elif depth >= MAX_NESTING:
            out.append(Text(take_apart([node]).replace("\n", " ")))
        elif name in _STYLES:
            children = _inlines(node.children, in_link, depth + 1)
            if not children:
                joins = False
                continue
            out.append(Styled(_STYLES[name], children))  # type: ignore[arg-type]
        elif name == "link" or name == "autolink":
            out.append(_link(node, name == "autolink", depth + 1))
        elif name == "image":
            src = ascii_web_host(node.meta["url"])
            alt = _alt_text(node.children)
            if in_link:
                out.append(Text(alt or src))
            else:
                link = Link(src, [Text(alt)] if alt else [])
                _finish_link(link)
                out.append(link)
        joins = True
    return out


def _link(node: Node, auto: bool, depth: int) -> Link:
    link = Link(ascii_web_host(node.meta["url"]), _inlines(node.children, True, depth), auto=auto)
    if auto:  # the address as written, its escapes decoded like a label's
        link.children = [Text(readable_url(plain_inlines(link.children)))]
    _finish_link(link)
    return link


def _finish_link(link: Link) -> None:
    label = plain_inlines(link.children)
    if not label.strip():  # shown as the address, like an autolink
        label = readable_url(link.href)
        link.children = [Text(label or link.href)]
        link.auto = True
    link.plain_suffix = "" if link.auto or label == link.href or not link.href else f" ({link.href})"


def _content(nodes: Sequence[Node]) -> str:
    if len(nodes) == 1:
        return nodes[0].meta["content"]
    return "".join([node.meta["content"] for node in nodes])


def _alt_text(nodes: Sequence[Node]) -> str:
    """An image's description as text (the alt text of images in it included)."""
    parts: list[str] = []
    _alt_parts(nodes, parts, 0)
    return "".join(parts).strip()


def _alt_parts(nodes: Sequence[Node], parts: list[str], depth: int) -> None:
    for node in nodes:
        name = node.name
        if name == "text" or name == "text_special":
            parts.append(node.meta["content"])
        elif name == "softbreak" or name == "hardbreak":
            parts.append(" ")
        elif name == "code_inline":
            parts.append(_content(node.children))
        elif depth >= MAX_NESTING:
            parts.append(take_apart([node]).replace("\n", " "))
        elif name == "image":
            inner: list[str] = []
            _alt_parts(node.children, inner, depth + 1)
            parts.append("".join(inner).strip())
        else:
            _alt_parts(node.children, parts, depth + 1)


def text_inlines(text: str) -> list[Inline]:
    """Literal text (newlines become line breaks) as inline nodes."""
    out: list[Inline] = []
    for n, line in enumerate(text.split("\n")):
        if n:
            out.append(Break(True))
        if line:
            out.append(Text(line))
    return out


def _trim_blank_lines(code: str) -> str:
    """Code without the blank lines before and after it (and without the final newline)."""
    lines = code.split("\n")
    first = 0
    while first < len(lines) and not lines[first].strip():
        first += 1
    last = len(lines)
    while last > first and not lines[last - 1].strip():
        last -= 1
    return "\n".join(lines[first:last])


def _lang(info: str) -> str:
    words = info.strip().split()
    if not words:
        return ""
    return "".join(c for c in words[0] if c in _LANG_CHARS)[:32]
