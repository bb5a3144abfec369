"""Small text measurements shared by the renderers and the chunker."""

from __future__ import annotations

import unicodedata

_ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff")
_ZWJ = "\u200d"


def escape(text: str) -> str:
    """Escape ``& < >`` (Telegram HTML text and Slack mrkdwn both require exactly these)."""
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    return text


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units, the unit Telegram counts limits in.

    Characters beyond the Basic Multilingual Plane (most emoji) count as two. Never less
    than ``len(text)``.
    """
    if text.isascii():  # known without a scan
        return len(text)
    # surrogatepass: a lone surrogate still counts as one unit instead of raising
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def display_width(text: str) -> int:
    """Columns ``text`` takes in a monospace font: wide East Asian characters and emoji
    take two, combining marks and zero-width characters none."""
    if text.isascii():
        return len(text)
    width = 0
    for char in text:
        if char in _ZERO_WIDTH or unicodedata.combining(char):
            continue
        code = ord(char)
        if 0xFE00 <= code <= 0xFE0F:  # variation selectors
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def safe_cut(text: str, pos: int) -> int:
    """Move a hard cut position left so it does not separate a character from the combining
    marks, variation selectors or zero-width joiners that belong to it. Returns ``pos``
    unchanged when no better position exists to the left."""
    cut = pos
    while 0 < cut < len(text) and _joins(text[cut - 1], text[cut]):
        cut -= 1
    return cut if cut > 0 else pos


def _joins(before: str, after: str) -> bool:
    if before == _ZWJ or after == _ZWJ:
        return True
    code = ord(after)
    return bool(unicodedata.combining(after) or 0xFE00 <= code <= 0xFE0F or 0x1F3FB <= code <= 0x1F3FF)
