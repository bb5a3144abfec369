"""The Markdown parser the renderer uses: pulldown-cmark, through pyromark.

CommonMark plus GitHub tables and strikethrough, as a flat stream of events
(``{"Start": "Paragraph"}``, ``{"Text": "…"}``, ``"SoftBreak"``, ``{"End": "Paragraph"}``…),
so that nothing nests in Python however deeply the input does.

pulldown-cmark always recognizes raw HTML; :mod:`.build` shows it as literal text.
A failure of the parser (a Rust panic arrives as a ``BaseException`` named
``PanicException``) is raised as :class:`ParserFailure`, never as anything that would
stop the caller.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TypeVar

import pyromark
from pyromark.event import Event, Range

MAX_NESTING = 20
"""Container levels (quotes and lists; emphasis, links and images) kept as structure;
deeper ones are kept as text. markdown-it's CommonMark preset stops at the same depth."""

# Subscript only so that single tildes (``~5~``) can be shown as written: strikethrough
# takes two, as in markdown-it.
_OPTIONS = (
    pyromark.Options.ENABLE_TABLES | pyromark.Options.ENABLE_STRIKETHROUGH | pyromark.Options.ENABLE_SUBSCRIPT
)
_PARSER = pyromark.Markdown(options=_OPTIONS)
_SURROGATE = re.compile("[\ud800-\udfff]")
_T = TypeVar("_T")


class ParserFailure(Exception):
    """The parser failed on ``source`` (the text as normalized for it)."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(reason)
        self.source = source


def events(markdown: str) -> tuple[str, tuple[Event, ...]]:
    """The events of ``markdown``, and the text they were parsed from: line endings and
    NUL normalized as CommonMark prescribes, lone surrogates (which cannot cross into the
    parser) replaced."""
    source = normalize(markdown)
    try:
        return source, _run(_PARSER.events, source)
    except UnicodeEncodeError:
        source = _SURROGATE.sub("\ufffd", source)
        return source, _run(_PARSER.events, source)


def ranged_events(source: str) -> tuple[tuple[Event, Range], ...]:
    """The events of ``source`` (as returned by :func:`events`) with the UTF-8 byte range
    of the text each stands for. About three times slower than the events alone."""
    return _run(_PARSER.events_with_range, source)


def without_surrogates(text: str) -> str:
    """``text`` with lone surrogates (which cannot be encoded to send) replaced."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def normalize(markdown: str) -> str:
    if "\r" in markdown:
        markdown = markdown.replace("\r\n", "\n").replace("\r", "\n")
    if "\x00" in markdown:
        markdown = markdown.replace("\x00", "\ufffd")
    return markdown


def _run(parse: Callable[[str], Iterable[_T]], source: str) -> tuple[_T, ...]:
    """All of ``parse(source)``; any failure but a lone surrogate raised as :class:`ParserFailure`."""
    try:
        return tuple(parse(source))
    except UnicodeEncodeError as error:
        if _SURROGATE.search(source):
            raise
        raise ParserFailure(source, repr(error)) from error
    except Exception as error:
        raise ParserFailure(source, repr(error)) from error
    except BaseException as error:
        if type(error).__name__ != "PanicException":
            raise  # KeyboardInterrupt, SystemExit, cancellation
        raise ParserFailure(source, repr(error)) from None
