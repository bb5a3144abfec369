"""Long inbound text: cut at the channel's limit, the full text kept as an attachment.

The model sees the first ``limit`` characters and a marker naming the attached file. The
file is written and synced before the message is committed, so a committed message never
points at a missing file; its name comes from the channel and the platform's event id, so
a redelivered event rewrites the same file and the pipeline's dedupe keeps it from
becoming a second message.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import uuid
from dataclasses import replace
from pathlib import Path

from connectors.base import Attachment, InboundEvent

_PLAIN = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")


def cut_marker(total: int, kept: int, name: str) -> str:
    return (
        f"\n\n[Cut here: this message has {total:,} characters; the first {kept:,} are above. "
        f"The full text is attached as {name}.]"
    )


def full_text_path(files_dir: Path, event: InboundEvent) -> Path:
    """``files_dir/<channel>/<chat>[/<thread>]/message-<event id>.txt``: beside the
    channel's other inbound files, one name per event."""
    key = event.thread_key
    folder = files_dir / _part(event.channel) / _part(key.chat_id)
    if key.topic:
        folder = folder / _part(key.topic)
    return folder / f"message-{_part(event.event_id)}.txt"


async def cut_long_text(event: InboundEvent, limit: int, files_dir: Path) -> InboundEvent:
    """``event`` with its text cut to ``limit`` characters and the full text attached."""
    path = full_text_path(files_dir, event)
    # surrogatepass: a lone surrogate from a platform's JSON is kept, not a reason to fail.
    data = event.text.encode("utf-8", "surrogatepass")
    await asyncio.to_thread(_write_durably, path, data)
    attachment = Attachment(name=path.name, path=str(path), mime_type="text/plain", size=len(data))
    text = event.text[:limit] + cut_marker(len(event.text), limit, path.name)
    return replace(event, text=text, attachments=(*event.attachments, attachment))


def _part(value: str) -> str:
    """A path component that stays in its folder: plain ids as they are, others hashed."""
    if _PLAIN.fullmatch(value):
        return value
    return "h" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _write_durably(path: Path, data: bytes) -> None:
    if path.is_file() and path.stat().st_size == len(data):
        return  # a redelivery: the same event's text is already on disk
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.part")
    try:
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)  # the rename itself survives a power loss
    finally:
        os.close(folder)
