"""Inbound documents, read when they arrive: the turn sees each one's type, size and opening text.

Before a message is committed, every attachment that is a document (docx, xlsx, pptx, pdf,
zip) is extracted by :mod:`gateway.documents`, off the event loop and within a time bound,
and the first :data:`EXCERPT_CHARS` characters of its text are kept on the attachment
(``excerpt``), so "what does this PDF say?" is answered without a tool call. A document that
cannot be read gets a one-line note instead; the message is committed either way.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path

from connectors.base import Attachment, InboundEvent
from gateway.documents import DocumentError, extract_bounded, kind_of

__all__ = ["EXCERPT_CHARS", "MAX_INBOUND_DOCUMENT", "with_excerpts"]

log = logging.getLogger("talon.intake")

EXCERPT_CHARS = 4000
MAX_INBOUND_DOCUMENT = 50 * 1024 * 1024
TIMEOUT = 10.0


async def with_excerpts(event: InboundEvent) -> InboundEvent:
    """``event`` with an excerpt on each document attachment (unchanged when there is none)."""
    if not any(kind_of(a.name, a.mime_type) for a in event.attachments):
        return event
    attachments = [await _excerpt(a) for a in event.attachments]
    return replace(event, attachments=tuple(attachments))


async def _excerpt(attachment: Attachment) -> Attachment:
    kind = kind_of(attachment.name, attachment.mime_type)
    if kind is None or attachment.excerpt is not None:
        return attachment
    try:
        data = await asyncio.to_thread(_read, Path(attachment.path))
        found = await extract_bounded(data, kind, TIMEOUT)
    except (OSError, DocumentError) as exc:
        log.info("an inbound %s could not be extracted: %s", kind, exc)
        return replace(attachment, excerpt=f"[{kind} not extracted: {exc}]")
    text = found.text.strip()
    excerpt = text[:EXCERPT_CHARS]
    if len(text) > EXCERPT_CHARS or found.truncated:
        excerpt += f"\n[... the first {EXCERPT_CHARS:,} characters; extract_document reads the rest]"
    return replace(attachment, excerpt=excerpt or f"[this {kind} holds no text]")


def _read(path: Path) -> bytes:
    if path.stat().st_size > MAX_INBOUND_DOCUMENT:
        raise DocumentError(f"it is over {MAX_INBOUND_DOCUMENT // (1024 * 1024)} MB")
    return path.read_bytes()
