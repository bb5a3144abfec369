"""Telegram: HTML in the subset the Bot API accepts (``parse_mode="HTML"``).

Only ``b i s code pre a blockquote`` are emitted. Telegram rejects some nestings, so a
code span inside a link is shown as its text, a quote inside a quote is merged into the
outer one, and a link inside a link is only its label. Links other than
``http(s)`` are shown as ``label (address)`` text: Telegram refuses unknown schemes and
``tg://`` links could mention users.
"""

from __future__ import annotations

from connectors.render.base import BOLD, Renderer, is_safe_web_url
from connectors.render.ir import Inline, Link, Style, Table
from connectors.render.table import layout
from connectors.render.text import escape

TELEGRAM_LIMIT = 4096
"""Message text limit, in UTF-16 code units. Chunks keep the HTML source itself within it."""


def escape_attribute(text: str) -> str:
    """Escape ``& < > "`` for a double-quoted attribute value."""
    return escape(text).replace('"', "&quot;")


class TelegramRenderer(Renderer):
    format = "html"

    opening: dict[Style, str] = {"bold": "<b>", "italic": "<i>", "strike": "<s>"}
    closing: dict[Style, str] = {"bold": "</b>", "italic": "</i>", "strike": "</s>"}
    text = staticmethod(escape)  # the text hook, without a call in between

    def code(self, text: str, in_link: bool) -> str:
        code = escape(text)
        return code if in_link else "<code>" + code + "</code>"  # a link cannot hold a code entity

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
