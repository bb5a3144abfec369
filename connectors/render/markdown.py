"""Markdown output: Discord's dialect, and CommonMark for the console.

Text is backslash-escaped so that nothing in it reads as markup: ``\\ ` * ~ | [ ] < > &``
always (``&`` only before what could be an entity), ``_`` unless it sits inside a word
(so ``snake_case`` and most URLs stay readable), and ``# - + =`` or ``1.`` at the start of
a line. Code never closes its own fence: Discord code gets a zero-width space between
consecutive backticks, CommonMark code a longer fence.

Discord extras: headings only down to ``###`` (deeper ones are bold), tables as code
blocks, quotes flattened (Discord cannot nest them), and ``@everyone``/``@here`` broken
by a zero-width space wherever they appear, as a second line of defence behind
``allowed_mentions``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from connectors.render.base import BOLD, Renderer, is_safe_web_url
from connectors.render.ir import Block, Inline, Link, Style, Styled, Table
from connectors.render.plain import plain_inlines
from connectors.render.slack import break_fences
from connectors.render.table import layout

DISCORD_LIMIT = 2000
"""Characters per message, counted in UTF-16 code units (never fewer than characters)."""

CONSOLE_LIMIT = 100_000
"""No platform limit; chunks stay below this so one reply never becomes one huge write."""

_ALWAYS = str.maketrans({char: "\\" + char for char in "\\`*~|[]<>"})
_ALWAYS_FOUND = re.compile(r"[\\`*~|\[\]<>]").search  # faster than a set test on most text
_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")  # not inside a word
_AMPERSAND = re.compile(r"&(?=[#A-Za-z0-9])")  # could start an entity
_LINE_START = frozenset("#-+=>")
# What escape_line_starts may change: the first line's first character, or a later line's.
_FIRST_LINE_START = " #-+=>0123456789"
_LATER_LINE_START = re.compile(r"\n[#\-+=>0-9]")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*$")  # what an autolink may hold
_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")
_PARENS = re.compile(r"[()]")
_ZWSP = "\u200b"
# What CommonMark counts as whitespace next to emphasis delimiters (Python's strip() differs).
_SPACE = " \t\n\r\f\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"


def escape(text: str) -> str:
    """Backslash-escape the characters that could start Markdown markup inside a line."""
    if _ALWAYS_FOUND(text):
        text = text.translate(_ALWAYS)
    if "_" in text:
        text = _UNDERSCORE.sub(r"\\_", text)
    if "&" in text:
        text = _AMPERSAND.sub(r"\\&", text)
    return text


def escape_line_starts(text: str) -> str:
    """Escape what would start a block (heading, list, quote, setext underline) at the
    start of a line of paragraph text; leading spaces of the first line are dropped so it
    cannot become indented code."""
    if text[:1] not in _FIRST_LINE_START and not _LATER_LINE_START.search(text):
        return text  # the usual paragraph: nothing to escape
    lines = text.split("\n")
    for n, line in enumerate(lines):
        if n == 0 and line[:1] == " ":
            line = line.lstrip(" ")
        if not line:
            pass
        elif line[0] in _LINE_START:
            line = "\\" + line
        elif line[0].isdigit():
            digits = len(line) - len(line.lstrip("0123456789"))
            if line[digits : digits + 1] in (".", ")"):
                line = line[:digits] + "\\" + line[digits:]
        lines[n] = line
    return "\n".join(lines)


def neutralize_mentions(text: str) -> str:
    """Break ``@everyone`` and ``@here`` with a zero-width space after the ``@``."""
    if "@" in text:
        text = text.replace("@everyone", "@" + _ZWSP + "everyone").replace("@here", "@" + _ZWSP + "here")
    return text


def _wrap(mark: str, inner: str) -> str:
    """``mark`` around ``inner`` with its outer whitespace kept outside, where emphasis
    delimiters must be for the span to parse."""
    core = inner.strip(_SPACE)
    if not core:
        return inner
    start = inner.find(core)
    return f"{inner[:start]}{mark}{core}{mark}{inner[start + len(core) :]}"


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return longest


def _destination(href: str) -> str:
    """A link destination for ``[label](…)``: parentheses stay when balanced and not
    nested (Wikipedia style); otherwise they are percent-encoded."""
    depth = 0
    for char in _PARENS.findall(href):
        if char == "(":
            depth += 1
            if depth > 1:
                break
        elif char == ")":
            depth -= 1
            if depth < 0:
                break
    else:
        if depth == 0:
            return href
    return href.replace("(", "%28").replace(")", "%29")


class MarkdownRenderer(Renderer):
    """Markdown for Discord (``discord=True``) or plain CommonMark (the console)."""

    format = "markdown"
    bullets = ("- ",)
    opening: dict[Style, str] = {"bold": "**", "italic": "*", "strike": "~~"}
    closing = opening

    def __init__(self, discord: bool) -> None:
        self.discord = discord

    def block(self, block: Block) -> str:
        out = super().block(block)
        return neutralize_mentions(out) if self.discord else out

    text = staticmethod(escape)  # the text hook, without a call in between

    def code(self, text: str, in_link: bool) -> str:
        if self.discord:
            fence = "`"
            if "`" in text:
                text, fence = break_fences(text), "``"
        else:
            fence = "`" * (_longest_backtick_run(text) + 1)
        pad = ""
        if text[:1] == "`" or text[-1:] == "`" or (text[:1] == text[-1:] == " " and text.strip()):
            pad = " "
        return f"{fence}{pad}{text}{pad}{fence}"

    def join_inlines(self, nodes: Sequence[Inline], parts: list[str]) -> str:
        # "*a*" then "**b**" would read as one delimiter run "***": switch the italic
        # span at the seam to underscores.
        for i in range(1, len(parts)):
            if not parts[i].startswith("*"):  # the usual seam, decided at once
                continue
            before = parts[i - 1]
            if before.endswith("*") and not before.endswith("\\*"):
                for j in (i, i - 1):
                    node, part = nodes[j], parts[j]
                    if type(node) is Styled and node.style == "italic" and part[:1] == part[-1:] == "*":
                        parts[j] = "_" + part[1:-1] + "_"
                        break
        return "".join(parts)

    def line_break(self, hard: bool) -> str:
        return "\\\n" if hard and not self.discord else "\n"

    def styled(self, style: Style, inner: str) -> str:
        return _wrap(self.opening[style], inner)

    def link(self, link: Link, active: frozenset[Style]) -> str:
        label = self.inlines(link.children, active, True)
        # Discord links only the web; the console shows whatever the reply linked to
        if not link.href or (self.discord and not is_safe_web_url(link.href)):
            return label + escape(link.plain_suffix)
        if link.auto or plain_inlines(link.children) == link.href:
            if self.discord:
                return link.href
            if _SCHEME.match(link.href):
                return f"<{link.href}>"
        return f"[{label}]({_destination(link.href)})"

    def paragraph(self, inner: str) -> str:
        return escape_line_starts(inner)

    def heading(self, level: int, children: list[Inline]) -> str:
        if self.discord and level > 3:
            inner = self.inlines(children, BOLD)
            return _wrap("**", inner.replace("\n", " "))
        inner = self.inlines(children).replace("\\\n", " ").replace("\n", " ")
        if inner.endswith("#"):
            inner = inner[:-1] + "\\#"  # a trailing # would read as a closing sequence
        return "#" * level + " " + inner

    def code_block(self, code: str, lang: str) -> str:
        if self.discord:
            return f"```{lang}\n{break_fences(code)}\n```"
        fence = "`" * max(3, _longest_backtick_run(code) + 1)
        return f"{fence}{lang}\n{code}\n{fence}"

    def quote(self, inner: str, depth: int) -> str:
        if self.discord:
            return inner if depth else "\n".join("> " + line for line in inner.split("\n"))
        return "\n".join("> " + line if line else ">" for line in inner.split("\n"))

    def table(self, table: Table) -> str:
        if self.discord or table.header is None:
            return self.code_block(layout(table), "")
        head = "| " + " | ".join(self._cell(cell) for cell in table.header) + " |"
        rule = "| " + " | ".join(_align_rule(align) for align in table.aligns) + " |"
        rows = ["| " + " | ".join(self._cell(cell) for cell in row) + " |" for row in table.rows]
        return "\n".join([head, rule, *rows])

    def _cell(self, cell: list[Inline]) -> str:
        # Text pipes are escaped already; a pipe in a code span would still end the cell.
        out = self.inlines(cell)
        return _UNESCAPED_PIPE.sub(r"\\|", out) if "|" in out else out

    def rule(self) -> str:
        return "———" if self.discord else "***"


def _align_rule(align: str | None) -> str:
    return {"left": ":---", "right": "---:", "center": ":---:"}.get(align or "", "---")


DISCORD = MarkdownRenderer(discord=True)
CONSOLE = MarkdownRenderer(discord=False)
