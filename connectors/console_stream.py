"""Streamed replies on the console: previews pushed to the thread's chat windows.

A preview is a ``{"type": "preview", "id", "text"}`` delivery the window redraws in place
(``text`` ``None``: it is gone); the reply that replaces it is an ordinary ``message``
delivery naming it in ``replaces``, so windows track and confirm it by its outbox id as any
other. Previews are not stored: a window that opens later sees only final replies.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from connectors.base import ChatType, RenderedChunk, SendResult, ThreadKey
from connectors.streaming import NativeStream

__all__ = ["ConsoleEditor"]

Publish = Callable[[str, dict[str, Any]], None]

PREVIEW_LIMIT = 8000


class ConsoleEditor:
    """The :class:`connectors.streaming.MessageEditor` of a console channel."""

    replaces_by_send = True

    def __init__(self, publish: Publish) -> None:
        self._publish = publish

    def min_interval(self, thread: ThreadKey) -> float:
        return 0.2  # a terminal redraws at once; the channel's stream_interval still applies

    def preview_limit(self) -> int:
        return PREVIEW_LIMIT

    async def post(self, thread: ThreadKey, text: str, reply_to: str | None) -> SendResult:
        preview_id = f"preview-{uuid.uuid4().hex[:16]}"
        self._publish(thread.chat_id, {"type": "preview", "id": preview_id, "text": text})
        return SendResult.sent(preview_id)

    async def edit(self, thread: ThreadKey, message_id: str, chunk: RenderedChunk) -> SendResult:
        self._publish(
            thread.chat_id, {"type": "preview", "id": message_id, "text": chunk.plain or chunk.text}
        )
        return SendResult.sent(message_id)

    async def delete(self, thread: ThreadKey, message_id: str) -> SendResult:
        self._publish(thread.chat_id, {"type": "preview", "id": message_id, "text": None})
        return SendResult.sent(message_id)

    def native(self, thread: ThreadKey, chat_type: ChatType) -> NativeStream | None:
        return None
