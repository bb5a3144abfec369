"""The production parser (pulldown-cmark) builds the same document as markdown-it-py.

markdown-it-py, a second implementation of CommonMark with the same table and
strikethrough extensions, is the reference (:mod:`tests.unit.render.legacy_parse`); both
recognize raw HTML and keep it as literal text the same way. Fixtures and hand-picked
constructs must give equal documents. Generated Markdown must too, except for these known
differences of the two parsers, each left out as narrowly as the test can tell it:

- Delimiter runs that cross or mix kinds (``~~_~~x~~_~~``, ``~~*a <~ b*~~``) pair
  differently, and runs of three or more tildes are text for pulldown-cmark (as in GFM)
  where markdown-it-py nests strikethroughs. The same words show either way: such input
  is compared with emphasis unwrapped.
- A fenced code block left open at the end of a list item takes in the blank lines after
  it (pulldown-cmark, like the CommonMark reference implementation); markdown-it-py counts
  them as separating the item's blocks and spaces the list out. Such input is compared
  without the lists' tightness.
- U+0085, U+2028 and U+2029 count as whitespace for emphasis in pulldown-cmark only, and
  ``~~`` between a letter and a symbol outside ASCII (``a~~€b~~``) opens a strikethrough
  in pulldown-cmark only.
- A tab, vertical tab or form feed at the end of a line is dropped by pulldown-cmark (a
  space and a tab there make a hard break), and a vertical tab or form feed after ``#``
  makes a heading.
- Tables: a delimiter row without pipes (``| a`` over ``:-``) makes a table for
  markdown-it-py only; a header row that does not start with a pipe cannot interrupt a
  paragraph in pulldown-cmark; a line indented four spaces right after a table is one more
  row for pulldown-cmark, indented code for markdown-it-py; and ``\\|`` inside an autolink
  in a cell keeps its backslash in pulldown-cmark.
- A code span that starts with a line ending inside a list item (``- `\\n & ```) keeps a
  space of it in pulldown-cmark and none in markdown-it-py: such input is left out.

Not generated here, and pinned in :mod:`tests.unit.render.test_parse`: a link reference
definition whose address is refused (``[r]: javascript:x``) is hidden by pulldown-cmark,
shown as a line of text by markdown-it-py.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from markdown_it.common.normalize_url import normalizeLink, validateLink

from bench.bench_render import sample
from connectors.render import parse
from connectors.render.ir import (
    Block,
    Document,
    Heading,
    Inline,
    Link,
    ListBlock,
    Paragraph,
    Quote,
    Styled,
    Table,
    Text,
)
from connectors.render.syntax import normalize
from connectors.render.urls import is_allowed_link, normalize_link
from tests.unit.render import legacy_parse
from tests.unit.render.strategies import markdown
from tests.unit.render.test_long_answer import long_answer

GOLDEN = Path(__file__).parent / "golden"

CONSTRUCTS = [
    "# H1\n## H2 ##\n###### H6\n\nSetext\n===\n\nSetext 2\n---",
    "*em* _em_ **strong** __strong__ ***both*** ~~strike~~ ~one~ `code` `` a`b `` ` `",
    "```python title\nx = 1\n\n```\n\n~~~\ntilde\n~~~\n\n    indented\n    code\n\n```\n```",
    "1. one\n2. two\n\n7) seven\n8) eight\n\n0. zero\n\n- a\n- b\n\n* c\n\n  d\n* e",
    "- a\n  - b\n    1. c\n\n       d\n- e\n\n> - in a quote\n>   > nested\n\n- ```\n  code\n  ```\n- > q",
    "> quote\n> **bold**\n>\n> > nested\n\n>\n\n> ```\n> code\n> ```",
    "| a | b | c | d |\n|---|:-:|--:|:--|\n| 1 | `x\\|y` | **3** |\n| 1 | 2 | 3 | 4 | 5 |\n\n| only |\n|---|",
    '[link](https://x.test "title") [ref][r] [empty]() [](https://x.test/a%20b/ü) <https://x.test/%C3%BC>\n\n[r]: /url',
    "<mailto:a@b.test> <a@b.test> ![alt *e* `c`](i.png 'T') [![inner](i.png)](https://o.test) ![](p.png)",
    "line one  \nhard\\\nsoft\nend\n\n***\n___\n- - -",
    "<b>bold?</b> <script>x</script>\n\n<div>\n*md* inside\n</div>\n\n<!-- comment -->",
    "&amp; &copy; &#35; &#x1F985; &bogus; &nbsp;x \\* \\_ \\` \\\\",
    "a\r\nb\r\n\r\n# c\rd\x00e",
    "[Ctrl+`] opens the terminal; `ls` lists files",
    "[x](javascript:alert(1)) ![*i*](VBScript:x 't') <javascript:y> [ok](data:image/png;base64,AA) [no](data:text/html,x)",
    "about ~5~ minutes, ~~gone~~, ~a~~ and a~b~c; [Bücher](https://bücher.de/ä) <https://bücher.de/%C3%A4?q=a b>",
    "- a\n\n  <div>\n  b\n  </div>\n- <!-- c -->\n\n<script>\n\n*kept*\n</script>\n\n*after*",
]


def _reference(source: str) -> Document:
    return legacy_parse.parse(source)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param((GOLDEN / "tricky.md").read_text(encoding="utf-8"), id="tricky"),
        pytest.param(sample(10_000), id="bench-sample"),
        pytest.param(long_answer(), id="long-answer"),
        *(pytest.param(text, id=f"construct-{n}") for n, text in enumerate(CONSTRUCTS)),
    ],
)
def test_fixtures_parse_the_same(source: str) -> None:
    assert parse(source) == _reference(source)


_EXOTIC_SPACE = re.compile("[\u0085\u2028\u2029]")
_TILDES = re.compile("~+")
_PIPELESS_ALIGNED_RULE = re.compile(r"^[ >]*(?::-+:?|-+:)[ \t]*$", re.MULTILINE)
_DELIMITER_KINDS = (re.compile(r"\*"), re.compile(r"_"), re.compile(r"~~"))
_LONG_TILDES = re.compile("~{3,}")
_ODD_SPACE = re.compile(r"[\t\x0b\x0c][ \t\x0b\x0c]*$|^[ >]*#{1,6}[\x0b\x0c]", re.MULTILINE)
_PIPE_IN_AUTOLINK = re.compile(r"<[^<>\n]*\\\|[^<>\n]*>")
# One or two backticks (a code span, not a fence) right before a line ending.
_SPAN_AT_LINE_END = re.compile(r"(?<!`)`{1,2}[\r\n]")
_CONTAINER_MARKS = re.compile(r"^(?:[ \t]*(?:>|[-+*](?=[ \t]|$)|\d{1,9}[.)](?=[ \t]|$)))*[ \t]*")
_DELIMITER_ROW = re.compile(r"[|: \t-]*-[|: \t-]*")
_FENCE = re.compile("`{3,}|~{3,}")
_LIST_MARKER = re.compile(r"(?:^|[ \t>])([-+*]|\d{1,9}[.)])(?=[ \t]|$)")
_QUOTE_MARKS = re.compile(r"^(?: {0,3}> ?)*")


def _symbol_next_to_tildes(source: str) -> bool:
    """A non-ASCII symbol (Unicode category S) right before or after ``~``."""
    for match in _TILDES.finditer(source):
        for neighbour in source[match.start() - 1 : match.start()] + source[match.end() : match.end() + 1]:
            if not neighbour.isascii() and unicodedata.category(neighbour).startswith("S"):
                return True
    return False


def _table_after_text(source: str) -> bool:
    """A table header row that does not start with a pipe, right after a line of text."""
    lines = [_CONTAINER_MARKS.sub("", line) for line in source.split("\n")]
    return any(
        _DELIMITER_ROW.fullmatch(lines[n]) and lines[n - 1][:1] != "|" and lines[n - 2].strip()
        for n in range(2, len(lines))
    )


def _fence_left_open(source: str) -> bool:
    """A fenced code block whose list item ends before its closing fence."""
    fence: tuple[str, int] | None = None  # the opening marker, and its column
    for line in source.split("\n"):
        marks = _CONTAINER_MARKS.match(line).group()  # type: ignore[union-attr]
        body = line[len(marks) :]
        if not body:
            continue
        marker = _FENCE.match(body)
        if fence is None:
            fence = (marker.group(), len(marks)) if marker else None
            continue
        item = _LIST_MARKER.search(marks)
        if len(marks) < fence[1] or (item is not None and item.start(1) < fence[1]):
            return True
        if marker and marker.group()[0] == fence[0][0] and len(marker.group()) >= len(fence[0]):
            fence = None if not body[marker.end() :].strip() else fence
    return False


def _indented_after_table(source: str) -> bool:
    """A line indented four spaces more than the table row before it."""
    lines = [_QUOTE_MARKS.sub("", line) for line in source.split("\n")]
    return any(
        "|" in before and _indent(line) >= _indent(before) + 4 and line.strip()
        for before, line in itertools.pairwise(lines)
    )


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _crossing_possible(source: str) -> bool:
    return sum(1 for kind in _DELIMITER_KINDS if kind.search(source)) >= 2


# Two independent parsers: the examples are fixed, so that a grammar difference not yet
# listed above turns up when someone explores with more examples, not at random in CI.
@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,  # nor replayed from a local example database: CI runs exactly these
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(markdown)
def test_generated_markdown_parses_the_same(source: str) -> None:
    source = normalize(source)
    assume(not _EXOTIC_SPACE.search(source) and not _symbol_next_to_tildes(source))
    assume(not _ODD_SPACE.search(source) and not _PIPELESS_ALIGNED_RULE.search(source))
    assume(not _PIPE_IN_AUTOLINK.search(source) and not _SPAN_AT_LINE_END.search(source))
    assume(not _table_after_text(source) and not _indented_after_table(source))
    new, old = parse(source), legacy_parse.parse(source)
    if new == old:
        return
    unwrap = _crossing_possible(source) or _LONG_TILDES.search(source) is not None
    spacing = not _fence_left_open(source)
    assert _shape(new.blocks, unwrap, spacing) == _shape(old.blocks, unwrap, spacing), (new, old)


def _shape(blocks: list[Block], unwrap_emphasis: bool, spacing: bool = True) -> list[object]:
    """Blocks as comparable values: with ``unwrap_emphasis``, leaving out which delimiters
    became emphasis; without ``spacing``, leaving out whether lists are tight."""
    out: list[object] = []
    for block in blocks:
        kind = type(block)
        if kind is ListBlock:
            lst: ListBlock = block  # type: ignore[assignment]
            items = [_shape(item.blocks, unwrap_emphasis, spacing) for item in lst.items]
            out.append(("list", lst.ordered, lst.start, lst.tight if spacing else None, items))
        elif kind is Quote:
            out.append(("quote", _shape(block.blocks, unwrap_emphasis, spacing)))  # type: ignore[union-attr]
        elif kind is Paragraph:
            out.append(("paragraph", _inlines(block.children, unwrap_emphasis)))  # type: ignore[union-attr]
        elif kind is Heading:
            heading: Heading = block  # type: ignore[assignment]
            out.append(("heading", heading.level, _inlines(heading.children, unwrap_emphasis)))
        elif kind is Table:
            table: Table = block  # type: ignore[assignment]
            rows = [table.header or [], *table.rows]
            out.append(("table", table.aligns, [[_inlines(c, unwrap_emphasis) for c in row] for row in rows]))
        else:
            out.append(block)
    return out


def _inlines(nodes: list[Inline], unwrap_emphasis: bool) -> list[object]:
    if not unwrap_emphasis:
        return list(nodes)
    out: list[object] = []
    _unwrap(nodes, out)
    return out


def _unwrap(nodes: list[Inline], out: list[object]) -> None:
    """Inline nodes with emphasis unwrapped and delimiter characters dropped from text."""
    for node in nodes:
        if type(node) is Styled:
            _unwrap(node.children, out)
        elif type(node) is Link:
            label: list[object] = []
            _unwrap(node.children, label)
            out.append(("link", node.href, label))
        elif type(node) is Text:
            text = re.sub("[*_~]", "", node.text)
            if text and out and type(out[-1]) is str:
                out[-1] += text  # type: ignore[operator]
            elif text:
                out.append(text)
        else:
            out.append(node)


_URL_PIECES = [
    *"aZ09;/?:@&=+$,-_.!~*'()#% [|]<>\\",
    *("%41", "%C3%BC", "%zz", "http://", "HTTPS://", "mailto:", "//", "::", ":80", "xn--", ".."),
    *("javascript:", "JavaScript:", "data:", "data:image/png;", "file:", "tg://", "ü", "ä.de", "漢字"),
    *("x" * 70, "y" * 300),
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_URL_PIECES), max_size=10).map("".join))
def test_link_addresses_are_normalized_and_vetted_as_markdown_it_does(url: str) -> None:
    assert normalize_link(url) == normalizeLink(url)
    assert is_allowed_link(normalize_link(url)) == validateLink(normalizeLink(url))
