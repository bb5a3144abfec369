"""A page's main content as Markdown: trafilatura drops menus, banners and footers, keeps links.

:func:`extract_page` is CPU work on a bounded input (the caller caps the page's bytes); run it in
a thread. It also measures the page's visible text, so the caller can say when extraction kept
less than half of a long page, and when a page is thin enough (built by scripts, say) to be
worth rendering in a browser and extracting again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import lxml.html
from lxml import etree

__all__ = ["ADVISORY_MIN_CHARS", "THIN_CHARS", "Extraction", "extract_page", "markdown_text_length"]

# The reference's rule: a source of at least this much visible text that keeps less than half of
# it gets the extraction advisory.
ADVISORY_MIN_CHARS = 2_000
# Extracted text shorter than this counts as thin: the page is rendered and extracted again.
THIN_CHARS = 200
_INVISIBLE = ("script", "style", "noscript", "template", "head", "svg", "iframe", "object")
_SPACE = re.compile(r"\s+")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_LIST_MARK = re.compile(r"^[ \t]*[-+][ \t]", re.MULTILINE)
_MARKUP = str.maketrans(dict.fromkeys("#*_>`|~", " "))


@dataclass(frozen=True, slots=True)
class Extraction:
    """What :func:`extract_page` found.

    Attributes:
        markdown (:obj:`str`): The main content as Markdown ('' when none was found).
        title (:obj:`str` | :obj:`None`): The page's ``<title>``.
        visible_chars (:obj:`int`): Characters of visible text on the page.
        kept_chars (:obj:`int`): Characters of text in ``markdown``, markup left out.
        scripted (:obj:`bool`): Whether the page runs scripts (rendering may add content).
    """

    markdown: str
    title: str | None
    visible_chars: int
    kept_chars: int
    scripted: bool

    @property
    def thin(self) -> bool:
        return self.kept_chars < THIN_CHARS

    @property
    def lossy(self) -> bool:
        """Less than half of a long page's visible text survived (the reference's advisory)."""
        return self.visible_chars >= ADVISORY_MIN_CHARS and self.kept_chars * 2 < self.visible_chars


def extract_page(html: bytes | str, url: str | None = None) -> Extraction:
    """Extract the main content of ``html`` (bytes are decoded by the page's own charset)."""
    try:
        tree = lxml.html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        return Extraction("", None, 0, 0, False)
    title_el = tree.find(".//title")
    title = _SPACE.sub(" ", title_el.text_content()).strip() if title_el is not None else None
    scripted = tree.find(".//script") is not None
    visible = _visible_chars(tree)
    markdown = _trafilatura(tree, url, fast=True)
    kept = markdown_text_length(markdown)
    if kept < THIN_CHARS or (visible >= ADVISORY_MIN_CHARS and kept * 2 < visible):
        # The quick pass found little: trafilatura's fallback extractors get their turn, on a
        # fresh tree (extraction prunes the one it is given).
        again = _trafilatura(lxml.html.document_fromstring(html), url, fast=False)
        kept_again = markdown_text_length(again)
        if kept_again > kept:
            markdown, kept = again, kept_again
    return Extraction(markdown.strip(), title or None, visible, kept, scripted)


def _trafilatura(tree: lxml.html.HtmlElement, url: str | None, *, fast: bool) -> str:
    """trafilatura's Markdown of ``tree``; ``fast`` skips its fallback extractors (readability,
    jusText), a fifth of its time on a long article that its own extractor reads well."""
    import trafilatura  # at first use: its import is a fifth of a second of every daemon start

    return (
        trafilatura.extract(
            tree,
            url=url,
            output_format="markdown",
            include_links=True,
            include_formatting=True,
            include_tables=True,
            include_images=False,
            include_comments=False,
            deduplicate=False,
            fast=fast,
        )
        or ""
    )


_VISIBLE_TEXT = etree.XPath(
    "descendant::text()[not(" + " or ".join(f"ancestor::{t}" for t in _INVISIBLE) + ")]"
)


def _visible_chars(tree: lxml.html.HtmlElement) -> int:
    """Characters of text outside scripts, styles and the head, whitespace runs counted once."""
    body = tree.find("body")
    texts = _VISIBLE_TEXT(body if body is not None else tree)
    # str.split collapses whitespace in C: a regex per text node was a tenth of the extraction.
    return sum(len(" ".join(t.split())) for t in texts)


def markdown_text_length(markdown: str) -> int:
    """Characters of text in ``markdown``: link targets and markup left out, spaces collapsed."""
    text = _LIST_MARK.sub(" ", _LINK.sub(r"\1", markdown)).translate(_MARKUP)
    return len(" ".join(text.split()))
