"""Telegram: HTML in the subset the Bot API accepts (``parse_mode="HTML"``).

Only ``b i s code pre a blockquote`` are emitted. Telegram rejects some nestings, so a
code span inside a link is shown as its text, a quote inside a quote is merged into the
outer one, and a link inside a link is only its label. Links other than
``http(s)`` are shown as ``label (address)`` text: Telegram refuses unknown schemes and
``tg://`` links could mention users.
"""

from __future__ import annotations

from collections.abc import Sequence

from connectors.render.base import BOLD, NO_STYLES, WITH_STYLE, Renderer, is_safe_web_url
from connectors.render.ir import Break, Code, Inline, Link, Style, Styled, Table, Text
from connectors.render.table import layout
from connectors.render.text import escape

TELEGRAM_LIMIT = 4096
"""Message text limit, in UTF-16 code units. Chunks keep the HTML source itself within it."""

_TAGS: dict[Style, str] = {"bold": "b", "italic": "i", "strike": "s"}
_OPEN = {style: f"<{tag}>" for style, tag in _TAGS.items()}
_CLOSE = {style: f"</{tag}>" for style, tag in _TAGS.items()}


def escape_attribute(text: str) -> str:
    """Escape ``& < > "`` for a double-quoted attribute value."""
    return escape(text).replace('"', "&quot;")


class TelegramRenderer(Renderer):
    format = "html"

    def inlines(
        self, nodes: Sequence[Inline], active: frozenset[Style] = NO_STYLES, in_link: bool = False
    ) -> str:
        # The base walk with the markup written in place: every reply's text goes through
        # here, and a hook call per node would cost more than the markup itself.
        if len(nodes) == 1 and type(nodes[0]) is Text:  # the common case, short
            return escape(nodes[0].text)
        parts: list[str] = []
        append = parts.append
        for node in nodes:
            kind = type(node)
            if kind is Text:
                text = node.text  # type: ignore[union-attr]
                append(escape(text) if "&" in text or "<" in text or ">" in text else text)
            elif kind is Code:
                code = escape(node.text)  # type: ignore[union-attr]
                append(code if in_link else "<code>" + code + "</code>")  # a link cannot hold a code entity
            elif kind is Styled:
                style = node.style  # type: ignore[union-attr]
                if style in active:
                    append(self.inlines(node.children, active, in_link))  # type: ignore[union-attr]
                else:
                    inner = self.inlines(node.children, WITH_STYLE[active][style], in_link)  # type: ignore[union-attr]
                    append(_OPEN[style] + inner + _CLOSE[style])
            elif kind is Break:
                append("\n")
            else:
                assert isinstance(node, Link)
                append(self.inlines(node.children, active, True) if in_link else self.link(node, active))
        return "".join(parts)

    def link(self, link: Link, active: frozenset[Style]) -> str:
        label = self.inlines(link.children, active, True)
        if is_safe_web_url(link.href):
            return f'<a href="{escape_attribute(link.href)}">{label}</a>'
        return label + escape(link.plain_suffix)

    def heading(self, level: int, children: list[Inline]) -> str:
        return f"<b>{self.inlines(children, BOLD)}</b>"

    def code_block(self, code: str, lang: str) -> str:
        if lang:
            return f'<pre><code class="language-{escape_attribute(lang)}">{escape(code)}</code></pre>'
        return f"<pre>{escape(code)}</pre>"

    def quote(self, inner: str, depth: int) -> str:
        # blockquote entities cannot nest: inner quotes merge into the outermost one
        return inner if depth else f"<blockquote>{inner}</blockquote>"

    def table(self, table: Table) -> str:
        return f"<pre>{escape(layout(table))}</pre>"

    def indent(self, text: str, pad: str) -> str:
        if "<pre" not in text:
            return super().indent(text, pad)
        # Indenting the lines inside <pre> would shift the code, not the block.
        lines = text.split("\n")
        out = [lines[0]]
        in_pre = _inside_pre_after(lines[0], False)
        for line in lines[1:]:
            out.append(pad + line if line and not in_pre else line)
            in_pre = _inside_pre_after(line, in_pre)
        return "\n".join(out)


def _inside_pre_after(line: str, inside: bool) -> bool:
    """Whether a ``<pre>`` block is still open at the end of ``line``."""
    at = line.rfind("<pre")
    if at >= 0:
        return line.find("</pre>", at) < 0
    return inside and "</pre>" not in line


TELEGRAM = TelegramRenderer()
