"""Model text made valid, whatever the server sent and however it split it.

Two things can go wrong on the way from a model server to Talon:

- The bytes of a stream are not valid UTF-8. The SDKs decode each SSE line strictly, so
  one bad byte would fail the whole call: :class:`ValidUTF8Decoder` replaces it with
  U+FFFD before the SDK decodes the line.
- A delta's JSON holds half of a UTF-16 surrogate pair (``"\\ud83d"`` here, ``"\\ude00"`` in
  the next delta). Python decodes each half to a lone surrogate, which no encoder accepts
  (saving it raises :exc:`UnicodeEncodeError`). :class:`TextJoiner` keeps a trailing high
  surrogate until the next delta and re-joins the pair.

Whatever cannot be repaired, lone surrogates and NUL, becomes U+FFFD.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

REPLACEMENT = "\ufffd"

# NUL and every surrogate: the only code points valid UTF-8 text can't carry as they are.
_SUSPECT = re.compile("[\x00\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with surrogate pairs joined into their characters and lone surrogates and
    NUL replaced by U+FFFD. Text without either comes back as the same object."""
    if _SUSPECT.search(text) is None:
        return text
    # UTF-16 is where the halves belong: written out as code units and read back, each
    # high-low pair becomes one character and each lone half becomes U+FFFD.
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return joined.replace("\x00", REPLACEMENT)


def clean_value(value: Any) -> Any:
    """A parsed JSON value with :func:`clean_text` applied to every string (keys included)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k: clean_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_value(v) for v in value]
    return value


def _is_high_surrogate(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


class TextJoiner:
    """Streamed deltas joined into valid text.

    :meth:`append` returns the text a delta completes (what may be shown now); a high
    surrogate at a delta's end waits for the low one in the next delta. :meth:`finish`
    flushes what still waits; :attr:`text` is everything so far.
    """

    __slots__ = ("_parts", "_pending")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._pending = ""

    def append(self, delta: str) -> str:
        if self._pending:
            delta, self._pending = self._pending + delta, ""
        if delta and _is_high_surrogate(delta[-1]):
            delta, self._pending = delta[:-1], delta[-1]
        delta = clean_text(delta)
        if delta:
            self._parts.append(delta)
        return delta

    def finish(self) -> str:
        """End of the stream: a high surrogate still waiting has no partner; returns the
        text that adds (U+FFFD, or nothing)."""
        if not self._pending:
            return ""
        self._pending = ""
        self._parts.append(REPLACEMENT)
        return REPLACEMENT

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def __bool__(self) -> bool:
        return bool(self._parts or self._pending)


class _SSEDecoder(Protocol):
    def iter_bytes(self, iterator: Iterator[bytes]) -> Iterator[Any]: ...

    def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[Any]: ...


def _utf8_decoder() -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder("utf-8")("replace")


def _repair(decoder: codecs.IncrementalDecoder, chunk: bytes) -> bytes:
    # ASCII with no character waiting for its last bytes is valid as it is.
    if chunk.isascii() and not decoder.getstate()[0]:
        return chunk
    # Incremental: a character cut between two network reads is kept whole.
    return decoder.decode(chunk).encode("utf-8")


def valid_utf8(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """``chunks`` with every invalid UTF-8 sequence replaced by U+FFFD."""
    decoder = _utf8_decoder()
    for chunk in chunks:
        yield _repair(decoder, chunk)
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail.encode("utf-8")


async def avalid_utf8(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """:func:`valid_utf8` for an async stream."""
    decoder = _utf8_decoder()
    async for chunk in chunks:
        yield _repair(decoder, chunk)
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail.encode("utf-8")


class ValidUTF8Decoder:
    """Wraps an SDK's SSE decoder so the bytes it decodes are valid UTF-8.

    Both SDKs build their decoder in ``_make_sse_decoder``; a provider's client returns
    this wrapper around the SDK's own decoder from there.
    """

    __slots__ = ("_inner",)

    def __init__(self, inner: _SSEDecoder) -> None:
        self._inner = inner

    def iter_bytes(self, iterator: Iterator[bytes]) -> Iterator[Any]:
        return self._inner.iter_bytes(valid_utf8(iterator))

    def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[Any]:
        return self._inner.aiter_bytes(avalid_utf8(iterator))
