"""The markdown-it-pyrs parser as the renderer uses it, with the guards its 0.4 release needs.

CommonMark plus GitHub tables and strikethrough, without the raw HTML rules: a model's
``<b>`` or ``<script>`` stays literal text.

Two defects of markdown-it-pyrs 0.4 are worked around here:

- Its code-span rule panics on a backtick run that never closes inside a link label
  (``[`x``). A Rust panic reaches Python as a ``BaseException``; such a reply is parsed
  again without code spans, so its backticks show as text.
- Freeing a syntax tree nested thousands of levels deep overflows the C stack. Callers
  walk a tree only :data:`MAX_NESTING` levels down and hand whatever lies deeper to
  :func:`take_apart`, which dismantles it iteratively.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from markdown_it_pyrs import MarkdownIt, Node

MAX_NESTING = 20
"""Container levels (quotes and lists; emphasis, links and images) kept as structure.
markdown-it's CommonMark preset stops at the same depth."""

# CommonMark's rules in the order CommonMark itself adds them, minus raw HTML.
_RULES = [
    *("newline", "escape", "backticks", "emphasis", "link", "image", "autolink", "entity"),
    *("code", "fence", "blockquote", "hr", "list", "reference", "heading", "lheading", "paragraph"),
    *("table", "strikethrough"),
]
PARSER = MarkdownIt("zero").enable_many(_RULES)  # type: ignore[arg-type]
_PARSER_NO_CODE_SPANS = MarkdownIt("zero").enable_many([r for r in _RULES if r != "backticks"])  # type: ignore[misc]
_SURROGATE = re.compile("[\ud800-\udfff]")
_TEXT = frozenset({"text", "text_special", "code_block", "fence"})
_BREAKS = frozenset({"softbreak", "hardbreak", "paragraph", "heading", "lheading", "list_item", "trow"})


class ParserPanic(RuntimeError):
    """The parser's Rust code panicked on this text."""


def syntax_tree(markdown: str) -> tuple[Node, str]:
    """The syntax tree of ``markdown``, and the text it was parsed from: line endings and
    NUL normalized as CommonMark prescribes, lone surrogates (which cannot cross into the
    parser) replaced. Source maps count UTF-8 bytes of that text."""
    source = normalize(markdown)
    try:
        return _tree(source), source
    except UnicodeEncodeError:
        source = _SURROGATE.sub("\ufffd", source)
        return _tree(source), source


def normalize(markdown: str) -> str:
    if "\r" in markdown:
        markdown = markdown.replace("\r\n", "\n").replace("\r", "\n")
    if "\x00" in markdown:
        markdown = markdown.replace("\x00", "\ufffd")
    return markdown


def _tree(source: str) -> Node:
    try:
        return run(PARSER, source)
    except ParserPanic:
        return run(_PARSER_NO_CODE_SPANS, source)


def run(parser: MarkdownIt, source: str) -> Node:
    """``parser.tree(source)``, a panic raised as :class:`ParserPanic`."""
    try:
        return parser.tree(source)
    except BaseException as error:
        if type(error).__name__ != "PanicException":
            raise
        raise ParserPanic(str(error)) from None


def take_apart(nodes: Sequence[Node]) -> str:
    """The text of ``nodes`` and everything below them, which are dismantled as they are
    read so that freeing them never recurses. Blocks and line breaks are separated by a
    newline."""
    parts: list[str] = []
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        name = node.name
        if name in _TEXT:
            parts.append(node.meta["content"])
        if name in _BREAKS and parts and parts[-1] != "\n":
            parts.append("\n")
        children = node.children
        if children:
            node.children = []
            stack.extend(reversed(children))
    return "".join(parts).strip("\n")
