"""The reference parse for the differential test: markdown-it-py tokens -> Document.

markdown-it-py (CommonMark, tables and strikethrough) is a second implementation of the
grammar production parses with pulldown-cmark. Raw HTML is recognized as CommonMark says
and kept as literal text the way production keeps it: inline HTML as text, an HTML block
as paragraphs of its lines.
"""

from __future__ import annotations

from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.common.utils import unescapeAll
from markdown_it.token import Token

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
from connectors.render.nodes import code_language, literal_paragraphs, make_table, trim_blank_lines
from connectors.render.plain import plain_inlines

_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])

_STYLES = {"em_open": "italic", "strong_open": "bold", "s_open": "strike"}
_CLOSES = frozenset({"em_close", "strong_close", "s_close", "link_close"})
_ALIGNS: dict[str, Align] = {
    "text-align:left": "left",
    "text-align:right": "right",
    "text-align:center": "center",
}


def parse(markdown: str) -> Document:
    """Parse ``markdown`` into a :class:`Document`. Blocks without visible content (blank
    paragraphs and headings, empty code blocks and quotes) are dropped."""
    tokens = _MD.parse(markdown)
    blocks, _ = _blocks(tokens, 0, "", markdown.split("\n"))
    return Document(blocks)


def _blocks(tokens: Sequence[Token], i: int, close: str, lines: list[str]) -> tuple[list[Block], int]:
    """Blocks from ``tokens[i]`` up to the token of type ``close``; returns the index after it."""
    blocks: list[Block] = []
    n = len(tokens)
    while i < n:
        tok = tokens[i]
        kind = tok.type
        if kind == close:
            return blocks, i + 1
        if kind == "paragraph_open":
            children = inlines(tokens[i + 1].children or [])
            if plain_inlines(children).strip():
                blocks.append(Paragraph(children))
            i += 3
        elif kind == "heading_open":
            children = inlines(tokens[i + 1].children or [])
            if plain_inlines(children).strip():
                blocks.append(Heading(int(tok.tag[1:] or 1), children))
            i += 3
        elif kind in ("fence", "code_block"):
            code = trim_blank_lines(tok.content)
            if code:
                blocks.append(
                    CodeBlock(code, code_language(unescapeAll(tok.info)))
                )  # as its renderer reads it
            i += 1
        elif kind in ("bullet_list_open", "ordered_list_open"):
            lst, i = _list(tokens, i, lines)
            blocks.append(lst)
        elif kind == "blockquote_open":
            inner, i = _blocks(tokens, i + 1, "blockquote_close", lines)
            if inner:
                blocks.append(Quote(inner))
        elif kind == "hr":
            blocks.append(Rule())
            i += 1
        elif kind == "html_block":
            blocks.extend(literal_paragraphs(tok.content))
            i += 1
        elif kind == "table_open":
            table, i = _table(tokens, i + 1)
            blocks.append(table)
        else:
            i += 1
    return blocks, i


def _list(tokens: Sequence[Token], i: int, lines: list[str]) -> tuple[ListBlock, int]:
    opening = tokens[i]
    ordered = opening.type == "ordered_list_open"
    close = "ordered_list_close" if ordered else "bullet_list_close"
    start = 1
    if ordered:
        try:
            start = int(opening.attrGet("start"))  # type: ignore[arg-type]
        except (TypeError, ValueError):  # no attribute: the list starts at 1
            start = 1
    items: list[ListItem] = []
    first = i
    i += 1
    while i < len(tokens) and tokens[i].type == "list_item_open":
        blocks, i = _blocks(tokens, i + 1, "list_item_close", lines)
        items.append(ListItem(blocks))
    if i < len(tokens) and tokens[i].type == close:
        i += 1
    # A table runs on into whatever follows it without a blank line: space such lists out.
    has_table = any(type(b) is Table for item in items for b in item.blocks)
    tight = not has_table and _tight(tokens[first:i], opening.level, lines)
    return ListBlock(items, ordered, start, tight), i


def _tight(tokens: Sequence[Token], level: int, lines: list[str]) -> bool:
    """Whether a list is tight. markdown-it hides the paragraphs of a tight list; a list
    without paragraphs is loose when a blank line separates its items or two blocks of an
    item (a block's line map may take in the blank lines after it: they are not counted)."""
    child_level = level + 2
    last_end: int | None = None
    for tok in tokens:
        if tok.type == "paragraph_open" and tok.level == child_level:
            return tok.hidden
        if tok.type == "list_item_open" and tok.level == level + 1:
            if tok.map and last_end is not None and tok.map[0] > last_end:
                return False
        elif tok.level == child_level and tok.nesting >= 0 and tok.map:  # a block in an item
            if last_end is not None and tok.map[0] > last_end:
                return False
            last_end = _content_end(tok.map, lines)
    return True


def _content_end(line_map: list[int], lines: list[str]) -> int:
    """The line after the last one of ``line_map`` that is not blank."""
    start, end = line_map
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return end


def _table(tokens: Sequence[Token], i: int) -> tuple[Table, int]:
    header: list[list[Inline]] = []
    rows: list[list[list[Inline]]] = []
    aligns: list[Align] = []
    row: list[list[Inline]] | None = None
    in_head = False
    while i < len(tokens):
        tok = tokens[i]
        kind = tok.type
        if kind == "table_close":
            i += 1
            break
        if kind == "thead_open":
            in_head = True
        elif kind == "thead_close":
            in_head = False
        elif kind == "tr_open":
            row = header if in_head else []
        elif kind == "tr_close":
            if row is not None and row is not header:
                rows.append(row)
            row = None
        elif kind in ("th_open", "td_open"):
            if in_head:
                aligns.append(_ALIGNS.get(str(tok.attrGet("style") or "")))
            cell = inlines(tokens[i + 1].children or []) if i + 1 < len(tokens) else []
            if row is not None:
                row.append(cell)
            i += 3
            continue
        i += 1
    # Padding, plain cells, widths and layout are not parsing: shared with production.
    return make_table(header, rows, aligns), i


def inlines(tokens: Sequence[Token]) -> list[Inline]:
    """Inline tokens -> inline nodes. Links never nest: an image inside a link becomes text."""
    root: list[Inline] = []
    stack: list[list[Inline]] = [root]
    links: list[Link] = []
    for tok in tokens:
        kind = tok.type
        out = stack[-1]
        if kind == "text" or kind == "text_special" or kind == "html_inline":
            text = tok.content
            if not text:
                continue
            if out and isinstance(out[-1], Text):
                out[-1] = Text(out[-1].text + text)
            else:
                out.append(Text(text))
        elif kind == "softbreak":
            out.append(Break(False))
        elif kind == "hardbreak":
            out.append(Break(True))
        elif kind == "code_inline":
            out.append(Code(tok.content))
        elif kind in _STYLES:
            node = Styled(_STYLES[kind], [])  # type: ignore[arg-type]
            out.append(node)
            stack.append(node.children)
        elif kind == "link_open":
            link = Link(str(tok.attrGet("href") or ""), [], auto=tok.markup == "autolink")
            out.append(link)
            stack.append(link.children)
            links.append(link)
        elif kind in _CLOSES:
            if len(stack) > 1:
                stack.pop()
            if kind == "link_close" and links:
                _finish_link(links.pop())
        elif kind == "image":
            src = str(tok.attrGet("src") or "")
            alt = _alt_text(tok.children or [])
            if links:
                out.append(Text(alt or src))
            else:
                link = Link(src, [Text(alt)] if alt else [])
                _finish_link(link)
                out.append(link)
    _drop_empty(root)
    return root


def _finish_link(link: Link) -> None:
    label = plain_inlines(link.children)
    if not label.strip():  # shown as the address, like an autolink
        label = _MD.normalizeLinkText(link.href) if link.href else ""
        link.children = [Text(label or link.href)]
        link.auto = True
    link.plain_suffix = "" if link.auto or label == link.href or not link.href else f" ({link.href})"


def _drop_empty(nodes: list[Inline]) -> None:
    """Remove styled spans and links left without content (``****`` never renders)."""
    keep: list[Inline] = []
    for node in nodes:
        if isinstance(node, (Styled, Link)):
            _drop_empty(node.children)
            if not node.children:
                continue
        keep.append(node)
    nodes[:] = keep


def _alt_text(tokens: Sequence[Token]) -> str:
    parts: list[str] = []
    for tok in tokens:
        if tok.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif tok.type == "image":
            parts.append(_alt_text(tok.children or []))
        else:
            parts.append(tok.content)
    return "".join(parts).strip()
