"""Markdown -> :class:`~connectors.render.ir.Document`.

The text is parsed by pulldown-cmark (:mod:`.syntax`: CommonMark, GitHub tables and
strikethrough) and the document built from its events (:mod:`.build`, where what the
renderer adds to the grammar is listed). Should the parser fail, the reply is kept as
literal text.
"""

from __future__ import annotations

import logging

from connectors.render import syntax
from connectors.render.build import build, build_ranged
from connectors.render.frames import NeedRanges
from connectors.render.ir import Document
from connectors.render.nodes import literal_paragraphs, make_table, text_inlines

__all__ = ["make_table", "parse", "text_inlines"]

log = logging.getLogger("talon.render")


def parse(markdown: str) -> Document:
    """Parse ``markdown`` into a :class:`Document`; if the parser fails on it, the text as
    written (a warning is logged)."""
    try:
        source, events = syntax.events(markdown)
        try:
            return Document(build(events))
        except NeedRanges:  # rare: see build()
            return Document(build_ranged(source, syntax.ranged_events(source)))
    except syntax.ParserFailure as failure:
        log.warning("the Markdown parser failed (%s); the reply is shown as written", failure)
        return Document(literal_paragraphs(failure.source))
