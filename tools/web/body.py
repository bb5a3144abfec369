"""Response bodies of the web tools: read with bounded memory, shown whole or as head and tail.

A body up to ``limit`` bytes is kept whole. Past it, the first two thirds and the last third of
``limit`` are kept while the rest streams by, counted but not stored, and reading stops at
:data:`READ_CEILING` bytes so an endless body costs bounded time as well as memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp

from tools.workspace.output_cap import HeadTail

__all__ = ["READ_CEILING", "Body", "cap_text", "fit_utf8", "head_tail_text", "read_body"]

# Past this many bytes the rest of a body is not read at all.
READ_CEILING = 64 * 1024 * 1024
_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class Body:
    """What was kept of a response body.

    Attributes:
        head (:obj:`bytes`): The body when whole, else its first bytes.
        tail (:obj:`bytes`): Its last bytes when cut, else empty.
        total (:obj:`int`): Bytes received (``complete`` False: reading stopped there).
        complete (:obj:`bool`): Whether the body was read to its end.
    """

    head: bytes
    tail: bytes
    total: int
    complete: bool

    @property
    def whole(self) -> bool:
        """Whether nothing was left out."""
        return self.complete and len(self.head) + len(self.tail) == self.total

    @property
    def data(self) -> bytes:
        return self.head + self.tail


async def read_body(resp: aiohttp.ClientResponse, limit: int) -> Body:
    """Read ``resp``'s body, keeping all of it up to ``limit`` bytes, else its head and tail."""
    head = limit * 2 // 3
    kept = HeadTail(head, limit - head)
    complete = True
    async for chunk in resp.content.iter_chunked(_CHUNK):
        kept.feed(chunk)
        if kept.total >= READ_CEILING:
            complete = False
            break
    first, last = kept.parts()
    if kept.total <= limit:
        return Body(first + last, b"", kept.total, complete)
    return Body(first, last, kept.total, complete)


def fit_utf8(text: str, size: int, *, from_end: bool = False) -> str:
    """The start (or end) of ``text`` that fits in ``size`` UTF-8 bytes, whole characters only."""
    encoded = text.encode("utf-8", errors="replace")
    if len(encoded) <= size:
        return text
    piece = encoded[len(encoded) - size :] if from_end else encoded[:size]
    # ``text`` encodes cleanly, so only the character cut at the edge is dropped.
    return piece.decode("utf-8", errors="ignore")


def head_tail_text(
    head: str, tail: str, left_out: int, total: int, *, complete: bool = True, hint: str
) -> str:
    """``head`` and ``tail`` with a marker saying how much was left out between them."""
    whole = f"{total:,} in all" if complete else f"reading stopped after {total:,}"
    return f"{head}\n\n[... {left_out:,} bytes left out; {whole}. {hint} ...]\n\n{tail}"


def cap_text(text: str, max_bytes: int, *, hint: str) -> tuple[str, bool]:
    """``text`` if it fits in ``max_bytes`` UTF-8 bytes, else its head and tail around a marker
    (the whole, marker included, within ``max_bytes``); and whether it was cut."""
    size = len(text.encode("utf-8", errors="replace"))
    if size <= max_bytes:
        return text, False
    room = max(max_bytes - 200 - len(hint.encode()), 0)
    head = fit_utf8(text, room * 2 // 3)
    tail = fit_utf8(text, room - room * 2 // 3, from_end=True)
    left_out = (
        size - len(head.encode("utf-8", errors="replace")) - len(tail.encode("utf-8", errors="replace"))
    )
    return head_tail_text(head, tail, left_out, size, hint=hint), True
