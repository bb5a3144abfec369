"""Packing a document's blocks into messages within a platform's limit.

Blocks are measured as rendered for the platform (in UTF-16 code units) and packed
greedily, joined by a blank line. A block that does not fit into an empty message is
cut (:mod:`connectors.render.split`); its head gets a message of its own and its tail
goes on like any other block. A block the splitter cannot cut is cut as plain text.

Plain-text twins: a chunk's ``plain`` is the exact slice of the document's plain text
that the chunk shows, including the whitespace that separates it from the next chunk
(a blank line between blocks, or the space or line break at a cut). Joining all twins
with nothing in between gives back :func:`connectors.render.plain.plain_document`.
"""

from __future__ import annotations

from collections import deque
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
Cut = tuple[Block, str, Block | None]


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
    joiner = renderer.block_joiner
    joiner_size = length(joiner)
    blocks = document.blocks
    if plains is None:
        plains = plain_blocks(document)
    last = len(blocks) - 1
    # (block, its plain text, plain text after it, whether it is the tail of a cut block)
    pending: deque[tuple[Block, str | None, str, bool]] = deque(
        (block, plain, joiner if n < last else "", False)
        for n, (block, plain) in enumerate(zip(blocks, plains, strict=True))
    )
    chunks: list[RenderedChunk] = []
    texts: list[str] = []
    twins: list[str] = []
    used = 0

    carry = ""  # plain text that belongs before the next chunk's

    def flush() -> None:
        nonlocal used, carry
        if texts:
            plain = carry + "".join(twins)
            carry = ""
            chunks.append(RenderedChunk(joiner.join(texts), plain, renderer.format))
        texts.clear()
        twins.clear()
        used = 0

    def add(text: str, block: Block, after: str, size: int | None = None, plain: str | None = None) -> None:
        nonlocal used
        used += (length(text) if size is None else size) + (joiner_size if texts else 0)
        texts.append(text)
        twins.append((plain_block(block) if plain is None else plain) + after)

    while pending:
        block, plain, after, is_tail = pending.popleft()
        # The tail of a huge block is not rendered whole when it cannot fit: only cut.
        if not is_tail or lower_bound(block, limit) <= limit:
            text = renderer.block(block)
            size = length(text)
            if used + size + (joiner_size if texts else 0) <= limit:
                add(text, block, after, size, plain)
                continue
            flush()
            if size <= limit:
                add(text, block, after, size, plain)
                continue
        flush()
        cut = _cut_huge(block, renderer, limit, length)
        if cut is None:
            whole = plain_block(block)
            visible = whole.lstrip()
            if visible and len(visible) < len(whole):
                # Leading whitespace longer than a message: it becomes part of the gap
                # between chunks, and the rest goes on as plain text.
                lead = whole[: len(whole) - len(visible)]
                if chunks:
                    chunks[-1] = replace(chunks[-1], plain=chunks[-1].plain + lead)
                else:
                    carry += lead
                pending.appendleft((Paragraph(text_inlines(visible)), None, after, True))
                continue
            add(renderer.block(block), block, after)  # unreachable at MIN_LIMIT and above
            flush()
            continue
        head, gap, tail = cut
        if tail is None:
            add(renderer.block(head), head, gap + after)
            continue
        add(renderer.block(head), head, gap)
        flush()
        pending.appendleft((tail, None, after, True))
    flush()
    return chunks


def _cut_huge(block: Block, renderer: Renderer, limit: int, length: Length) -> Cut | None:
    """Cut only the window of ``block`` that a head can reach, then join its tail back."""
    window = take_window(block, limit)
    if window is None:
        return _cut(block, renderer, limit, length)
    prefix, rest, joint = window
    cut = _cut(prefix, renderer, limit, length)
    if cut is None:
        return _cut(block, renderer, limit, length)
    head, gap, tail = cut
    if tail is None:
        return head, gap + joint, rest
    joined = join(tail, rest)
    if joined is None:
        return _cut(block, renderer, limit, length)
    return head, gap, joined


def _cut(block: Block, renderer: Renderer, limit: int, length: Length) -> Cut | None:
    """``(head, gap, tail)``: ``plain(head) + gap + plain(tail) == plain(block)`` and the
    head fits. ``tail`` is ``None`` when nothing visible is left after the head (then
    ``gap`` is the rest of the block's plain text, all whitespace)."""

    def measure(b: Block) -> int:
        return length(renderer.block(b))

    whole = plain_block(block)
    parts = split_block(block, measure, limit)
    if parts is not None:
        cut = _checked(whole, *parts)
        if cut is not None:
            return cut
    if type(block) is Paragraph and all(type(c) in (Text, Break) for c in block.children):
        return None
    fallback = Paragraph(text_inlines(whole))
    if measure(fallback) <= limit:
        return fallback, "", None
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
        return head, gap + tail_plain, None
    return head, gap, tail
