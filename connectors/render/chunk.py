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
from collections.abc import Callable

from connectors.base import RenderedChunk
from connectors.render.base import Renderer
from connectors.render.ir import Block, Break, Document, Paragraph, Text
from connectors.render.parse import text_inlines
from connectors.render.plain import plain_block
from connectors.render.split import split_block
from connectors.render.text import utf16_len

MIN_LIMIT = 32
"""Smallest limit honoured; below it markup around a single character might not fit."""


def chunk_document(
    document: Document,
    renderer: Renderer,
    limit: int,
    length: Callable[[str], int] = utf16_len,
) -> list[RenderedChunk]:
    """Render ``document`` with ``renderer`` as chunks whose text is at most ``limit``
    long as measured by ``length``."""
    limit = max(limit, MIN_LIMIT)
    joiner = renderer.block_joiner
    joiner_size = length(joiner)
    blocks = document.blocks
    pending: deque[tuple[Block, str]] = deque(
        (block, joiner if n + 1 < len(blocks) else "") for n, block in enumerate(blocks)
    )
    chunks: list[RenderedChunk] = []
    texts: list[str] = []
    plains: list[str] = []
    used = 0

    def flush() -> None:
        nonlocal used
        if texts:
            chunks.append(RenderedChunk(joiner.join(texts), "".join(plains), renderer.format))
        texts.clear()
        plains.clear()
        used = 0

    def add(text: str, size: int, block: Block, after: str) -> None:
        nonlocal used
        used += size + (joiner_size if texts else 0)
        texts.append(text)
        plains.append(plain_block(block) + after)

    while pending:
        block, after = pending.popleft()
        text = renderer.block(block)
        size = length(text)
        if used + size + (joiner_size if texts else 0) <= limit:
            add(text, size, block, after)
            continue
        flush()
        if size <= limit:
            add(text, size, block, after)
            continue
        cut = _cut(block, renderer, limit, length)
        if cut is None:  # unreachable at MIN_LIMIT and above; never loop forever
            add(text, size, block, after)
            flush()
            continue
        head, gap, tail = cut
        head_text = renderer.block(head)
        if tail is None:
            add(head_text, length(head_text), head, gap + after)
            continue
        add(head_text, length(head_text), head, gap)
        flush()
        pending.appendleft((tail, after))
    flush()
    return chunks


def _cut(
    block: Block, renderer: Renderer, limit: int, length: Callable[[str], int]
) -> tuple[Block, str, Block | None] | None:
    """``(head, gap, tail)``: ``plain(head) + gap + plain(tail) == plain(block)`` and the
    head fits. ``tail`` is ``None`` when nothing visible is left after the head (then
    ``gap`` is the rest of the block's plain text, all whitespace)."""

    def measure(b: Block) -> int:
        return length(renderer.block(b))

    whole = plain_block(block)
    parts = split_block(block, measure, limit)
    if parts is not None:
        head, tail = parts
        head_plain, tail_plain = plain_block(head), plain_block(tail)
        gap = _gap(whole, head_plain, tail_plain)
        if gap is not None:
            return (head, gap + tail_plain, None) if not tail_plain.strip() else (head, gap, tail)
    if type(block) is Paragraph and all(_is_plain(child) for child in block.children):
        return None
    fallback = Paragraph(text_inlines(whole))
    if measure(fallback) <= limit:
        return fallback, "", None
    parts = split_block(fallback, measure, limit)
    if parts is None:
        return None
    head, tail = parts
    head_plain, tail_plain = plain_block(head), plain_block(tail)
    gap = _gap(whole, head_plain, tail_plain)
    if gap is None:
        return None
    return (head, gap + tail_plain, None) if not tail_plain.strip() else (head, gap, tail)


def _is_plain(node: object) -> bool:
    return type(node) is Text or type(node) is Break


def _gap(whole: str, head: str, tail: str) -> str | None:
    """What lies between ``head`` and ``tail`` in ``whole``, when they are its prefix and
    suffix and the cut made progress."""
    if not head or len(tail) >= len(whole) or len(head) + len(tail) > len(whole):
        return None
    if not (whole.startswith(head) and whole.endswith(tail)):
        return None
    return whole[len(head) : len(whole) - len(tail)]
