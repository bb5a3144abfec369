"""Slack: ``mrkdwn`` text.

``& < >`` are escaped everywhere (code included, as Slack requires), so no text from the
model can form ``<!channel>``, ``<!here>``, ``<@U…>`` or ``<#C…>``: the only ``<`` in the
output opens a link this module built, ``<url|label>``, with ``& < > |`` in the address
escaped and the label escaped. Quotes inside quotes merge, as Slack cannot nest them.
mrkdwn has no escape for ``*``, ``_``, ``~`` or backticks, so a literal one in the text
can still pair up with another into formatting; a backtick inside inline code is shown
as a look-alike (U+02CB).
"""

from __future__ import annotations

from connectors.render.base import BOLD, Renderer, is_safe_web_url
from connectors.render.ir import Inline, Link, Style, Table
from connectors.render.plain import plain_inlines
from connectors.render.table import layout
from connectors.render.text import escape

SLACK_LIMIT = 40_000
"""Characters per message (counted in UTF-16 code units, which is never fewer)."""

_ZWSP = "\u200b"


def escape_url(url: str) -> str:
    """An address for ``<url|label>``: ``|`` would end it early, so it is percent-encoded."""
    return escape(url).replace("|", "%7C")


def break_fences(code: str) -> str:
    """Separate consecutive backticks with a zero-width space so code never closes its fence."""
    while "``" in code:
        code = code.replace("``", "`" + _ZWSP + "`")
    return code


class SlackRenderer(Renderer):
    format = "mrkdwn"
    opening: dict[Style, str] = {"bold": "*", "italic": "_", "strike": "~"}
    closing = opening
    text = staticmethod(escape)  # the text hook, without a call in between

    def code(self, text: str, in_link: bool) -> str:
        if not text.strip():
            return escape(text)
        # a backtick cannot be escaped inside Slack code; show a look-alike
        return "`" + escape(text.replace("`", "\u02cb")) + "`"

    def styled(self, style: Style, inner: str) -> str:
        if not inner.strip():
            return inner  # a mark around nothing visible would show as itself
        return self.opening[style] + inner + self.closing[style]

    def link(self, link: Link, active: frozenset[Style]) -> str:
        if not is_safe_web_url(link.href, ("http://", "https://", "mailto:")):
            return self.inlines(link.children, active, True) + escape(link.plain_suffix)
        label = plain_inlines(link.children).replace("\n", " ")
        url = escape_url(link.href)
        if label == link.href:
            return f"<{url}>"
        return f"<{url}|{escape(label)}>"

    def heading(self, level: int, children: list[Inline]) -> str:
        return f"*{self.inlines(children, BOLD)}*"

    def code_block(self, code: str, lang: str) -> str:
        return f"```\n{escape(break_fences(code))}\n```"

    def quote(self, inner: str, depth: int) -> str:
        if depth:
            return inner
        return "\n".join("> " + line if line else ">" for line in inner.split("\n"))

    def table(self, table: Table) -> str:
        return self.code_block(layout(table), "")


SLACK = SlackRenderer()
