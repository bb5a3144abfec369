"""The intermediate representation a Markdown reply is parsed into.

A :class:`Document` is a list of blocks; paragraphs and headings hold inline nodes. The
tree is small on purpose: it keeps only what some platform can show. Chunking splits this
tree (never rendered text), so every chunk renders to well-formed markup on its own.

The node classes are final: the renderer dispatches on ``type(node) is ...``, which the
type checker narrows both ways only for a class without subclasses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, final

Style = Literal["bold", "italic", "strike"]
Align = Literal["left", "right", "center"] | None


@final
@dataclass(slots=True)
class Text:
    """Literal text, already unescaped; renderers escape it for their platform."""

    text: str


@final
@dataclass(slots=True)
class Code:
    """An inline code span."""

    text: str


@final
@dataclass(slots=True)
class Break:
    """A line break inside a paragraph. ``hard`` is a Markdown hard break (``\\`` or two spaces)."""

    hard: bool = False


@final
@dataclass(slots=True)
class Styled:
    """Bold, italic or strikethrough around inline children."""

    style: Style
    children: list[Inline]


@final
@dataclass(slots=True)
class Link:
    """A link (images become links to the image).

    Attributes:
        href (:obj:`str`): The destination, as normalized by the parser.
        children (list[Inline]): The label.
        plain_suffix (:obj:`str`): What the plain-text twin shows after the label, ``" (href)"``
            when the label does not already show the address. Empty on the first part of a
            link that chunking cut in two, so the address is shown once, after the last part.
        auto (:obj:`bool`): An autolink (``<https://…>``): the label is the address itself.
    """

    href: str
    children: list[Inline]
    plain_suffix: str = ""
    auto: bool = False


Inline = Text | Code | Break | Styled | Link


@final
@dataclass(slots=True)
class Paragraph:
    children: list[Inline]


@final
@dataclass(slots=True)
class Heading:
    level: int
    children: list[Inline]


@final
@dataclass(slots=True)
class CodeBlock:
    """A fenced or indented code block. ``code`` has no trailing newline; ``lang`` is sanitized."""

    code: str
    lang: str = ""


@final
@dataclass(slots=True)
class ListItem:
    """One list item. ``continued`` marks the rest of an item that chunking cut: it is shown
    without its marker, as the continuation of the previous chunk's last item."""

    blocks: list[Block]
    continued: bool = False


@final
@dataclass(slots=True)
class ListBlock:
    items: list[ListItem]
    ordered: bool = False
    start: int = 1
    tight: bool = True


@final
@dataclass(slots=True)
class Quote:
    blocks: list[Block]


@final
@dataclass(slots=True)
class Table:
    """A table, laid out as monospace text on chat platforms.

    Attributes:
        header (list[list[Inline]] | None): Header cells; ``None`` on the rows that chunking
            moved to a later chunk.
        rows (list[list[list[Inline]]]): Body rows of cells.
        aligns (list[Align]): Column alignment.
        widths (list[int]): Column display widths, fixed at parse time so that every part
            of a cut table lines up the same way.
        header_plain / rows_plain: The cells as plain text.
        lines (list[str]): The table laid out as monospace text, also fixed at parse time:
            the header and its rule (when ``header`` is set), then one line per row.
    """

    header: list[list[Inline]] | None
    rows: list[list[list[Inline]]]
    aligns: list[Align]
    widths: list[int]
    header_plain: list[str] | None = None
    rows_plain: list[list[str]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


@final
@dataclass(slots=True)
class Rule:
    """A thematic break."""


Block = Paragraph | Heading | CodeBlock | ListBlock | Quote | Table | Rule


@final
@dataclass(slots=True)
class Document:
    blocks: list[Block]
