"""Packing a document's blocks into messages within a platform's limit.

Blocks are measured as rendered for the platform (in UTF-16 code units) and packed
greedily, joined by a blank line. A block that does not fit into an empty message is
cut (:mod:`connectors.render.split`, :mod:`connectors.render.text_cursors`): each head gets a message of its own, and the rest
goes on like any other block once it fits. A block the splitter cannot cut is cut as
plain text. Each block is rendered once, and one whose lower bound
(:mod:`connectors.render.bounds`) is already over the limit is not rendered whole at all.

Plain-text twins: a chunk's ``plain`` is the exact slice of the document's plain text
that the chunk shows, including the whitespace that separates it from the next chunk
(a blank line between blocks, or the space or line break at a cut). Joining all twins
with nothing in between gives back :func:`connectors.render.plain.plain_document`.
So the twin of each head of a cut block is the next slice of the block's plain text,
checked against the head's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from connectors.base import RenderedChunk
from connectors.render.base import Renderer
from connectors.render.bounds import lower_bound
from connectors.render.cursor import Cursor
from connectors.render.ir import Block, Document, Paragraph
from connectors.render.parse import text_inlines
from connectors.render.plain import plain_block, plain_blocks
from connectors.render.split import open_cursor
from connectors.render.text import utf16_len
from connectors.render.text_cursors import InlineCursor

MIN_LIMIT = 32
"""Smallest limit honoured; below it markup around a single character might not fit."""

Length = Callable[[str], int]


def chunk_document(
    document: Document,
    renderer: Renderer,
    limit: int,
    length: Length = utf16_len,
    plains: Sequence[str] | None = None,
) -> list[RenderedChunk]:
    """Render ``document`` with ``renderer`` as chunks whose text is at most ``limit``
    long as measured by ``length``. ``plains``, when given, is the plain text of each of the
    document's blocks (:func:`~connectors.render.plain.plain_blocks`), shared by the
    platforms a document is rendered for."""
    limit = max(limit, MIN_LIMIT)
    packer = _Packer(renderer, limit, length)
    blocks = document.blocks
    if plains is None:
        plains = plain_blocks(document)
    render = renderer.block
    joiner = renderer.block_joiner
    last = len(blocks) - 1
    for n, (block, plain) in enumerate(zip(blocks, plains, strict=True)):
        after = joiner if n < last else ""
        # A block whose text alone cannot fit is only cut, never rendered whole (a lower
        # bound is never more than the plain text's length).
        if len(plain) > limit and lower_bound(block, limit) > limit:
            packer.cut(block, plain, after)
            continue
        text = render(block)
        if not packer.offer(text, length(text), plain + after):
            packer.cut(block, plain, after)
    packer.flush()
    return packer.chunks


class _Packer:
    """The chunks made so far and the one being filled (rendered blocks joined by the
    renderer's block joiner), each with its plain-text twin."""

    def __init__(self, renderer: Renderer, limit: int, length: Length) -> None:
        self.renderer = renderer
        self.limit = limit
        self.length = length
        self.joiner = renderer.block_joiner
        self.joiner_size = length(self.joiner)
        self.chunks: list[RenderedChunk] = []
        self.texts: list[str] = []
        self.twins: list[str] = []
        self.used = 0
        self.carry = ""  # plain text that belongs before the next chunk's

    def offer(self, text: str, size: int, twin: str) -> bool:
        """Add a rendered block ``size`` long to the chunk being filled, or to a new one when
        it does not fit there. ``False`` when it fits in no message."""
        if self.texts:
            used = self.used + self.joiner_size + size
            if used <= self.limit:
                self.used = used
                self.texts.append(text)
                self.twins.append(twin)
                return True
            self.flush()
        if size > self.limit:
            return False
        self.used = size
        self.texts.append(text)
        self.twins.append(twin)
        return True

    def flush(self) -> None:
        if self.texts:
            plain = self.carry + "".join(self.twins)
            self.carry = ""
            self.chunks.append(RenderedChunk(self.joiner.join(self.texts), plain, self.renderer.format))
            self.texts = []
            self.twins = []
        self.used = 0

    def cut(self, block: Block, plain: str, after: str) -> None:
        """Cut a block that fits in no message: each head gets a message of its own, and
        the rest goes on like any other block once it fits. ``plain`` is the block's plain
        text; each head's twin is the next slice of it."""
        self.flush()
        renderer, limit, length = self.renderer, self.limit, self.length

        def measure(b: Block) -> int:
            return length(renderer.block(b))

        cursor = open_cursor(block)
        as_text = False  # the rest is cut as plain text
        done = 0  # of ``plain``, what the heads so far show
        shown = len(plain.rstrip())  # from here on, nothing is visible
        may_fit = False  # the whole block is known not to
        while True:
            if may_fit and cursor.bound(limit) <= limit:
                text = renderer.block(cursor.rest())
                size = length(text)
                if size <= limit:
                    self.offer(text, size, plain[done:] + after)
                    return
            may_fit = True
            head = _take(cursor, measure, limit, plain, done)
            if head is not None:
                end = done + len(head[1])
                if end >= shown:  # nothing visible is left after the head
                    self._put(renderer.block(head[0]), plain[done:] + after)
                    return
                self._put(renderer.block(head[0]), head[1])
                self.flush()
                done = end
                continue
            rest = plain[done:]
            if not as_text:  # the structure cannot be cut here: cut its text
                cursor, as_text = InlineCursor(text_inlines(rest), Paragraph), True
                continue
            visible = rest.lstrip()
            if not visible or len(visible) == len(rest):  # unreachable at MIN_LIMIT and above
                self._put(renderer.block(cursor.rest()), rest + after)
                self.flush()
                return
            # Leading whitespace longer than a message: it becomes part of the gap between
            # chunks, and the rest goes on.
            self._add_gap(rest[: len(rest) - len(visible)])
            done += len(rest) - len(visible)
            cursor = InlineCursor(text_inlines(visible), Paragraph)

    def _put(self, text: str, twin: str) -> None:
        """Add a block to the chunk being filled, whatever its size."""
        self.used += self.length(text) + (self.joiner_size if self.texts else 0)
        self.texts.append(text)
        self.twins.append(twin)

    def _add_gap(self, plain: str) -> None:
        """Plain text between the last chunk and the next (the chunk being filled is empty)."""
        if self.chunks:
            self.chunks[-1] = replace(self.chunks[-1], plain=self.chunks[-1].plain + plain)
        else:
            self.carry += plain


def _take(
    cursor: Cursor, measure: Callable[[Block], int], limit: int, plain: str, done: int
) -> tuple[Block, str] | None:
    """The next head off ``cursor`` and its twin, the slice of ``plain`` from ``done`` it shows
    with the gap after it; ``None`` when the cursor cannot cut, or its head shows nothing or
    is not what ``plain`` holds there."""
    step = cursor.take(measure, limit)
    if step is None:
        return None
    head, gap = step
    head_plain = plain_block(head)
    if not head_plain.strip() or not plain.startswith(head_plain, done):
        return None
    if not plain.startswith(gap, done + len(head_plain)):
        return None
    return head, head_plain + gap
