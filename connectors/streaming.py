"""What a connector offers for streamed replies: editing and deleting its own messages, and
the platform's native streaming where it has one.

A connector that can edit exposes ``message_editor`` (a :class:`MessageEditor`); one without
it gets no streaming (the reply arrives whole, as before). Every method classifies platform
failures into a :class:`SendResult` and never raises for them. An editor with
``replaces_by_send = True`` (the console, whose deliveries carry the outbox row's id) gets the
reply's first chunk through the connector's ``send`` with
:attr:`connectors.base.OutboundChunk.replaces` set, instead of as an edit.
"""

from __future__ import annotations

from typing import Protocol

from connectors.base import ChatType, Connector, RenderedChunk, SendResult, ThreadKey

__all__ = ["MessageEditor", "NativeStream", "editor_of"]


class NativeStream(Protocol):
    """One reply streamed through the platform's own API (Telegram drafts, Slack streams)."""

    message_id: str | None
    """The platform message the stream left behind (Slack), which the final reply then edits;
    ``None`` when nothing stays (a Telegram draft vanishes when the reply is sent)."""

    async def update(self, text: str) -> SendResult:
        """Show ``text`` (everything so far, plain) as the streamed reply."""

    async def finish(self) -> SendResult:
        """End the stream; the final rendering follows through the outbox."""


class MessageEditor(Protocol):
    """Editing a connector's own messages, for previews of replies in progress."""

    def min_interval(self, thread: ThreadKey) -> float:
        """The fewest seconds between two edits of one message in ``thread`` the platform allows."""

    def preview_limit(self) -> int:
        """The longest preview text, in characters, that fits in one message."""

    async def post(self, thread: ThreadKey, text: str, reply_to: str | None) -> SendResult:
        """Post ``text`` as plain text; the result carries the new message's id."""

    async def edit(self, thread: ThreadKey, message_id: str, chunk: RenderedChunk) -> SendResult:
        """Replace the message's text (``chunk.format`` ``plain`` for a preview). An edit that
        changes nothing counts as done."""

    async def delete(self, thread: ThreadKey, message_id: str) -> SendResult:
        """Delete the message; one already gone counts as done."""

    def native(self, thread: ThreadKey, chat_type: ChatType) -> NativeStream | None:
        """A native stream for ``thread``, or ``None`` where the platform has none (the caller
        then edits a preview)."""


def editor_of(connector: Connector | None) -> MessageEditor | None:
    """The connector's editor, or ``None`` when it cannot edit its messages."""
    return getattr(connector, "message_editor", None) if connector is not None else None
