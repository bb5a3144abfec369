"""Packing a document's blocks into messages within a platform's limit.

Blocks are measured as rendered for the platform (in UTF-16 code units) and packed
greedily, joined by a blank line. A block that does not fit into an empty message is
cut (:mod:`connectors.render.split`); its head gets a message of its own and its tail
goes on like any other block. A block the splitter cannot cut is cut as plain text.
Each block is rendered once, and one whose lower bound (:mod:`connectors.render.window`)
is already over the limit is not rendered whole at all.

Plain-text twins: a chunk's ``plain`` is the exact slice of the document's plain text
that the chunk shows, including the whitespace that separates it from the next chunk
(a blank line between blocks, or the space or line break at a cut). Joining all twins
with nothing in between gives back :func:`connectors.render.plain.plain_document`.
So the twin of a cut block's tail is the rest of the block's plain text, never walked again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from connectors.base import RenderedChunk
from connectors.render.base import Renderer
from connectors.render.ir import Block, Break, Document, Paragraph, Text
from connectors.render.parse import text_inlines
from connectors.render.plain import plain_block, plain_blocks
from connectors.render.split import split_block
from connectors.render.text import utf16_len
from connectors.render.window import join, lower_bound, take_window

MIN_LIMIT = 32
"""Smallest limit honoured; below it markup around a single character might not fit."""

Length = Callable[[str], int]
Cut = tuple[Block, str, str, Block | None]  # head, its plain text, gap, tail


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
        the last tail goes on like any other block. ``plain`` is the block's plain text:
        every tail's is the rest of it after the head and the gap."""
        self.flush()
        renderer, limit, length = self.renderer, self.limit, self.length
        while True:
            cut = _cut_huge(block, plain, renderer, limit, length)
            if cut is None:
                visible = plain.lstrip()
                if not visible or len(visible) == len(plain):  # unreachable at MIN_LIMIT and above
                    self._put(renderer.block(block), plain + after)
                    self.flush()
                    return
                # Leading whitespace longer than a message: it becomes part of the gap
                # between chunks, and the rest goes on as plain text.
                self._add_gap(plain[: len(plain) - len(visible)])
                block, plain = Paragraph(text_inlines(visible)), visible
            else:
                head, head_plain, gap, tail = cut
                if tail is None:
                    self._put(renderer.block(head), head_plain + gap + after)
                    return
                self._put(renderer.block(head), head_plain + gap)
                self.flush()
                block, plain = tail, plain[len(head_plain) + len(gap) :]
            # The tail is not rendered whole when it cannot fit: only cut.
            if lower_bound(block, limit) <= limit:
                text = renderer.block(block)
                size = length(text)
                if size <= limit:
                    self.offer(text, size, plain + after)
                    return

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


def _cut_huge(block: Block, plain: str, renderer: Renderer, limit: int, length: Length) -> Cut | None:
    """Cut only the window of ``block`` that a head can reach, then join its tail back.
    ``plain`` is the block's plain text."""
    window = take_window(block, limit)
    if window is None:
        return _cut(block, plain, renderer, limit, length)
    prefix, rest, joint = window
    cut = _cut(prefix, plain_block(prefix), renderer, limit, length)
    if cut is None:
        return _cut(block, plain, renderer, limit, length)
    head, head_plain, gap, tail = cut
    if tail is None:
        return head, head_plain, gap + joint, rest
    joined = join(tail, rest)
    if joined is None:
        return _cut(block, plain, renderer, limit, length)
    return head, head_plain, gap, joined


def _cut(block: Block, whole: str, renderer: Renderer, limit: int, length: Length) -> Cut | None:
    """``(head, plain(head), gap, tail)``: ``plain(head) + gap + plain(tail) == whole``, the
    block's plain text, and the head fits. ``tail`` is ``None`` when nothing visible is left
    after the head (then ``gap`` is the rest of ``whole``, all whitespace)."""

    def measure(b: Block) -> int:
        return length(renderer.block(b))

    parts = split_block(block, measure, limit)
    if parts is not None:
        cut = _checked(whole, *parts)
        if cut is not None:
            return cut
    if type(block) is Paragraph and all(type(c) in (Text, Break) for c in block.children):
        return None
    fallback = Paragraph(text_inlines(whole))
    if measure(fallback) <= limit:
        return fallback, whole, "", None
    parts = split_block(fallback, measure, limit)
    return None if parts is None else _checked(whole, *parts)


def _checked(whole: str, head: Block, tail: Block) -> Cut | None:
    """The cut with its gap, when ``head`` and ``tail`` are a prefix and a suffix of
    ``whole`` in plain text, the head shows something and the cut made progress."""
    head_plain, tail_plain = plain_block(head), plain_block(tail)
    if (
        not head_plain.strip()
        or len(tail_plain) >= len(whole)
        or len(head_plain) + len(tail_plain) > len(whole)
    ):
        return None
    if not (whole.startswith(head_plain) and whole.endswith(tail_plain)):
        return None
    gap = whole[len(head_plain) : len(whole) - len(tail_plain)]
    if not tail_plain.strip():
        return head, head_plain, gap + tail_plain, None
    return head, head_plain, gap, tail
