"""Intermediate-representation nodes made from parsed pieces: paragraphs of literal text,
tables, links, code blocks, and the trimming the Markdown grammar asks for."""

from __future__ import annotations

from collections.abc import Sequence

from connectors.render.ir import Align, Block, Break, Code, Inline, Link, Paragraph, Styled, Table, Text
from connectors.render.plain import plain_inlines
from connectors.render.table import layout_lines
from connectors.render.text import display_width
from connectors.render.urls import readable_url

_LANG_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+#.-")
MAX_COLUMN_WIDTH = 120
"""Columns are padded to at most this many display columns (about the widest line a chat
shows unwrapped); a wider cell runs past its column. Padding every row to one huge cell
would make a table's layout grow with its rows times that cell."""

# What markdown-it trims around a paragraph, heading or cell: JavaScript's trim() less U+FEFF.
_TRIM = (
    "\t\n\x0b\x0c\r \xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)


def text_inlines(text: str) -> list[Inline]:
    """Literal text (newlines become line breaks) as inline nodes."""
    out: list[Inline] = []
    for n, line in enumerate(text.split("\n")):
        if n:
            out.append(Break(True))
        if line:
            out.append(Text(line))
    return out


def literal_paragraphs(text: str) -> list[Block]:
    """``text`` shown as written, as the paragraphs Markdown would make of plain lines:
    one per run of lines between blank lines, each line without the spaces around it."""
    paragraphs: list[Block] = []
    lines: list[Inline] = []
    for line in [*text.split("\n"), ""]:
        line = line.strip(" \t")
        if line:
            if lines:
                lines.append(Break(False))
            lines.append(Text(line))
            continue
        children = strip_inlines(lines)
        if visible(children):
            paragraphs.append(Paragraph(children))
        lines = []
    return paragraphs


def strip_inlines(children: list[Inline]) -> list[Inline]:
    """Without the whitespace around the content (line breaks after or before it included):
    the parser trims spaces and tabs only, the markdown-it grammar all of :data:`_TRIM`."""
    if not children:
        return children
    head, tail = children[0], children[-1]
    if (
        (not isinstance(head, Text) or head.text[:1] not in _TRIM)
        and not isinstance(tail, Break)
        and (not isinstance(tail, Text) or tail.text[-1:] not in _TRIM)
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
    if children and isinstance(head := children[0], Text):
        children[0] = Text(head.text.lstrip(_TRIM))
    if children and isinstance(tail := children[-1], Text):
        children[-1] = Text(tail.text.rstrip(_TRIM))
    return children


def _blank(node: Inline) -> bool:
    return isinstance(node, Text) and not node.text.strip(_TRIM)


def visible(nodes: Sequence[Inline]) -> bool:
    """Whether the plain text of ``nodes`` shows anything but whitespace."""
    for node in nodes:
        match node:
            case Text() | Code():
                if node.text and not node.text.isspace():
                    return True
            case Styled() | Link():
                if visible(node.children):
                    return True
    return False


def finish_link(link: Link) -> None:
    """Give a link without a visible label its address as label, and set its plain suffix."""
    label = plain_inlines(link.children)
    if not label.strip():  # shown as the address, like an autolink
        label = readable_url(link.href)
        link.children = [Text(label or link.href)]
        link.auto = True
    link.plain_suffix = "" if link.auto or label == link.href or not link.href else f" ({link.href})"


def make_table(header: list[list[Inline]], rows: list[list[list[Inline]]], aligns: list[Align]) -> Table:
    """A table from its cells, padded to the same number of columns, with its plain text,
    column widths and layout fixed."""
    columns = max([len(header), *(len(r) for r in rows)])
    aligns = aligns + [None] * (columns - len(aligns))
    header += [[] for _ in range(columns - len(header))]
    for r in rows:
        r += [[] for _ in range(columns - len(r))]
    header_plain = _cell_texts(header)
    rows_plain = [_cell_texts(r) for r in rows]
    widths = [max(3, display_width(text)) for text in header_plain]
    for row in rows_plain:
        for col, text in enumerate(row):
            width = display_width(text)
            if width > widths[col]:
                widths[col] = width
    widths = [min(width, MAX_COLUMN_WIDTH) for width in widths]
    lines = layout_lines(header_plain, rows_plain, widths, aligns)
    return Table(header, rows, aligns, widths, header_plain, rows_plain, lines)


def _cell_texts(cells: list[list[Inline]]) -> list[str]:
    texts = [plain_inlines(cell) for cell in cells]
    return [text.replace("\n", " ") if "\n" in text else text for text in texts]


def trim_blank_lines(code: str) -> str:
    """Code without the blank lines before and after it (and without the final newline)."""
    if code[:1].strip() and code[-1:] == "\n" and code[-2:-1].strip():
        return code[:-1]  # the common case: nothing blank around it
    lines = code.split("\n")
    first = 0
    while first < len(lines) and not lines[first].strip():
        first += 1
    last = len(lines)
    while last > first and not lines[last - 1].strip():
        last -= 1
    return "\n".join(lines[first:last])


def code_language(info: str) -> str:
    """The language of a fenced code block: the first word of its info string, sanitized."""
    words = info.strip().split()
    if not words:
        return ""
    return "".join(c for c in words[0] if c in _LANG_CHARS)[:32]
