"""One turn's streamed reply: the preview the chat sees while the model writes and works.

How it stays exactly-once with the durable outbox:

- The preview is posted (plain text, ending in a "writing…" or tool status line, so it never
  looks final) and its platform id is recorded in ``stream_previews`` right away.
- When the turn ends, the reply's first outbox row carries the preview's id (``edit_of``) and
  is delivered as an edit, committed in the one transaction that marks the preview ``final``.
  An edit is idempotent, so a retried or crash-interrupted edit cannot double the reply; a
  preview that can no longer be edited is replaced by a fresh message and then deleted.
- When anything else reached the chat after the preview (a file the turn sent, a question,
  a ``channel_send``), editing the preview would leave the reply above it: the reply is then
  sent fresh below, and an outbox row after it removes the preview (see
  :func:`gateway.store.previews.posted_since`).
- A preview still ``open`` when its turn is gone (a crash, a failure) is stale: the thread's
  next turn deletes it or marks it as interrupted (``stale_preview``) before it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from connectors.base import ChatType, Connector, ErrorClass, RenderedChunk, SendResult, ThreadKey
from connectors.streaming import MessageEditor, NativeStream, editor_of
from gateway.config import Settings
from gateway.events import Event, EventBus
from gateway.runtime.agent import Steered, ToolBox, ToolOutcome
from gateway.runtime.model import ToolCall, ToolSpec
from gateway.store.db import Database
from gateway.store.outbox import ThreadAddress, enqueue_chunks, enqueue_drop
from gateway.store.previews import (
    PreviewRow,
    add_preview,
    close_preview,
    finalize_preview,
    open_previews,
    posted_since,
)
from gateway.streaming import PreviewPacer

__all__ = [
    "INTERRUPTED",
    "SUPERSEDED",
    "LiveReply",
    "Preview",
    "StatusToolBox",
    "compose",
    "enqueue_reply",
    "open_live_reply",
    "settle_stale",
    "stale_preview_of",
    "streaming_mode",
]

log = logging.getLogger("talon.streaming")

WRITING = "✍️ writing…"
_UP_WAIT = 10.0  # seconds a stale preview's settling waits for its channel to come up
INTERRUPTED = "⚠️ This answer was interrupted before it was finished."
SUPERSEDED = "⬇️ The answer is below."
"""What a superseded preview says where the platform refuses to delete it."""


@dataclass(frozen=True, slots=True)
class Preview:
    """A preview on the platform: its ``stream_previews`` row and platform message id, and
    when its posting began (what reached the chat from then on may be below it)."""

    row_id: int
    message_id: str
    since: float = 0.0


def compose(body: str, status: str | None) -> str:
    """The preview's text: the reply so far, then what the turn is doing."""
    footer = f"⏳ {status}" if status else WRITING
    return f"{body}\n\n{footer}" if body else footer


class LiveReply:
    """Streams one turn's reply into its chat (``mode`` edit or native).

    Args:
        db: the store, to record the preview as soon as it exists.
        editor: the channel's message editor.
        interval: the fewest seconds between two edits (the platform's minimum applies too).
        status_label: the status shown while a tool runs, by tool name.
    """

    def __init__(
        self,
        *,
        db: Database,
        editor: MessageEditor,
        key: ThreadKey,
        chat_type: ChatType,
        thread_id: int,
        run_id: int | None,
        mode: str,
        interval: float,
        reply_to: str | None,
        status_label: Callable[[str], str],
        bus: EventBus | None = None,
    ) -> None:
        self._db = db
        self._editor = editor
        self._key = key
        self._thread_id = thread_id
        self._run_id = run_id
        self._reply_to = reply_to
        self._label = status_label
        self._native: NativeStream | None = editor.native(key, chat_type) if mode == "native" else None
        self._preview: Preview | None = None
        self._posting_since = 0.0
        status_here = getattr(editor, "status_here", None)
        self._status_here = bool(status_here and status_here(key))
        self._status_shown: str | None = None
        self.pacer = PreviewPacer(
            self._show,
            interval=max(interval, editor.min_interval(key)),
            limit=max(editor.preview_limit() - 100, 100),  # room for the status line
        )
        self._listening = contextlib.ExitStack()
        if bus is not None:  # children's emit_progress, published by gateway.children.service
            self._listening.enter_context(bus.subscribe(thread_id, _ProgressFeed(self.pacer)))

    # ---------------------------------------------------------------- from the model loop

    async def on_text(self, delta: str) -> None:
        self.pacer.text(delta)

    def tool_started(self, name: str) -> None:
        self.pacer.status(self._label(name))

    def tool_ended(self) -> None:
        """The status stays until the model writes again (it is still working meanwhile)."""

    def tools(self, inner: ToolBox) -> ToolBox:
        """``inner`` reporting each call's status here (a steered toolbox stays as it is)."""
        return inner if isinstance(inner, Steered) else StatusToolBox(inner, self)

    # ---------------------------------------------------------------- showing

    async def _show(self, body: str, status: str | None) -> SendResult:
        if self._status_here:
            await self._native_status(status)
            status = None
        text = compose(body, status)
        if self._preview is None:
            self._posting_since = time.time()
        if self._native is not None:
            result = await self._native.update(body if getattr(self._native, "appends", False) else text)
            if result.ok:
                await self._record(self._native.message_id)
                return result
            if result.error_class is ErrorClass.TRANSIENT and result.retry_after:
                return result
            log.info("native streaming refused (%s); editing a preview instead", result.error)
            self._native = None
            if self._preview is not None:  # the stream's message becomes the preview
                return await self._edit(text)
        if self._preview is None:
            result = await self._editor.post(self._key, text, self._reply_to)
            if result.ok:
                await self._record(result.platform_message_id)
            return result
        return await self._edit(text)

    async def _native_status(self, status: str | None) -> None:
        """The platform's own status line (a Slack assistant thread's), set when it changes."""
        if status == self._status_shown:
            return
        result = await self._editor.set_status(self._key, status or "")  # type: ignore[attr-defined]
        if result.ok:
            self._status_shown = status
        elif result.error_class is ErrorClass.PERMANENT:
            self._status_here = False  # show it in the preview from now on

    async def _edit(self, text: str) -> SendResult:
        assert self._preview is not None
        return await self._editor.edit(
            self._key, self._preview.message_id, RenderedChunk(text, text, "plain")
        )

    async def _record(self, message_id: str | None) -> None:
        if message_id is None or self._preview is not None:
            return
        row_id = await self._db.run_transaction(
            partial(
                add_preview,
                run_id=self._run_id,
                thread_id=self._thread_id,
                key=self._key,
                platform_message_id=message_id,
                now=time.time(),
            )
        )
        self._preview = Preview(row_id, message_id, self._posting_since)

    # ---------------------------------------------------------------- ending

    async def close(self) -> Preview | None:
        """The model is done: stop showing; the preview (if one) is for the reply to replace."""
        self._listening.close()
        # A reply that replaces the preview by being sent (the console) is no edit to pace.
        await self.pacer.close(wait=not getattr(self._editor, "replaces_by_send", False))
        if self._native is not None:
            result = await self._native.finish()
            if not result.ok:
                log.info("ending the native stream failed: %s", result.error)
        await self._clear_status()
        return self._preview

    async def _clear_status(self) -> None:
        if self._status_here and self._status_shown:
            await self._native_status(None)

    async def discard(self, stale_preview: str) -> None:
        """The turn ended without a reply to replace the preview (it failed, was stopped or is
        silent): delete the preview or mark it as interrupted."""
        self._listening.close()
        await self.pacer.close()
        if self._native is not None:
            await self._native.finish()
        await self._clear_status()
        if self._preview is not None:
            row = PreviewRow(
                self._preview.row_id,
                self._run_id,
                self._thread_id,
                self._key.channel,
                self._key.chat_id,
                self._key.topic or "",
                self._preview.message_id,
            )
            await _settle(self._db, self._editor, row, stale_preview)


class _ProgressFeed(asyncio.Queue[Event]):
    """A bus subscription that shows a child's progress message as the turn's status."""

    def __init__(self, pacer: PreviewPacer) -> None:
        super().__init__()
        self._pacer = pacer

    def put_nowait(self, item: Event) -> None:
        if item.get("type") == "child_progress" and item.get("message"):
            self._pacer.status(str(item["message"])[:80])


class StatusToolBox:
    """A toolbox that shows each call's status in the live reply while it runs."""

    def __init__(self, inner: ToolBox, live: LiveReply) -> None:
        self._inner = inner
        self._live = live

    def specs(self) -> Sequence[ToolSpec]:
        return self._inner.specs()

    async def call(self, call: ToolCall) -> ToolOutcome:
        self._live.tool_started(call.name)
        try:
            return await self._inner.call(call)
        finally:
            self._live.tool_ended()


async def settle_stale(
    db: Database,
    connectors: Mapping[str, Connector],
    thread_id: int,
    stale_preview: Callable[[str], str],
    rows: Sequence[PreviewRow] | None = None,
) -> int:
    """Delete or mark (``stale_preview(channel)``) the previews a crash or failure left open
    in ``thread_id`` (``rows``, when the caller read them already); returns how many are still
    open (their channel is not up yet)."""
    left = 0
    for row in await db.read(open_previews, thread_id) if rows is None else rows:
        connector = connectors.get(row.channel)
        editor = editor_of(connector)
        if connector is None or editor is None:
            continue
        if not await _up(connector) or not await _settle(db, editor, row, stale_preview(row.channel)):
            left += 1
    return left


async def _up(connector: Connector) -> bool:
    """Whether the channel is up, waiting a little while it starts (after a restart the
    retried turn may come before the channel is connected)."""
    for _ in range(int(_UP_WAIT / 0.1)):
        if connector.health.state not in ("starting", "retrying", "reconnecting"):
            return True
        await asyncio.sleep(0.1)
    return False


async def _settle(db: Database, editor: MessageEditor, row: PreviewRow, how: str) -> bool:
    """Delete (``how`` delete) or mark the preview; a preview that cannot be deleted is marked."""
    result = SendResult.failed(ErrorClass.PERMANENT, "not tried")
    if how == "delete":
        result = await editor.delete(row.key, row.platform_message_id)
    if not result.ok:
        result = await editor.edit(
            row.key, row.platform_message_id, RenderedChunk(INTERRUPTED, INTERRUPTED, "plain")
        )
    if result.ok or result.error_class is ErrorClass.PERMANENT:  # gone or uneditable: nothing more to do
        await db.run_transaction(close_preview, row.id, time.time())
        log.info(
            "stale preview %s in %s %s", row.platform_message_id, row.key, "settled" if result.ok else "left"
        )
        return True
    return False


def enqueue_reply(
    conn: sqlite3.Connection,
    address: ThreadAddress,
    chunks: Sequence[RenderedChunk],
    preview: Preview | None,
    *,
    run_id: int | None,
    message_id: int | None,
    reply_to: str | None,
    now: float,
) -> tuple[list[int], int]:
    """The reply's outbox rows, in the commit's transaction, and the seq for rows after it.

    With a preview still open, the reply's first chunk replaces it by an edit, unless
    anything reached the chat since the preview was posted: then every chunk is sent fresh
    (the reply stays below what the turn posted) and one more row removes the preview once
    they are delivered. That row is not among the ids returned (it delivers no message)."""
    if preview is None or not chunks or not finalize_preview(conn, preview.row_id, now):
        ids = enqueue_chunks(conn, address, chunks, run_id=run_id, message_id=message_id, reply_to=reply_to)
        return ids, len(chunks)
    if not posted_since(conn, address.thread_id, preview.since):
        ids = enqueue_chunks(
            conn,
            address,
            chunks,
            run_id=run_id,
            message_id=message_id,
            reply_to=reply_to,
            edit_of=preview.message_id,
        )
        return ids, len(chunks)
    ids = enqueue_chunks(conn, address, chunks, run_id=run_id, message_id=message_id, reply_to=reply_to)
    enqueue_drop(
        conn,
        address,
        preview.message_id,
        mark=SUPERSEDED,
        seq=len(chunks),
        run_id=run_id,
        message_id=message_id,
    )
    return ids, len(chunks) + 1


def streaming_mode(settings: Settings, key: ThreadKey, chat_type: str) -> str:
    """The streaming mode of a chat: its binding's, else its channel's (by chat type)."""
    channel = settings.channel(key.channel)
    if channel is None:
        return "off"
    override = next(
        (b.streaming for b in settings.bindings if b.channel == key.channel and b.chat == key.chat_id), None
    )
    if override is None:
        override = next(
            (b.streaming for b in settings.bindings if b.channel == key.channel and b.chat is None), None
        )
    return channel.streaming_for(chat_type, override)


def stale_preview_of(settings: Settings, channel: str) -> str:
    """What becomes of a channel's stale previews: ``delete`` or ``mark``."""
    found = settings.channel(channel)
    return found.stale_preview if found is not None else "delete"


def open_live_reply(
    *,
    settings: Settings,
    db: Database,
    connector: Connector | None,
    key: ThreadKey,
    chat_type: ChatType,
    thread_id: int,
    run_id: int | None,
    reply_to: str | None,
    labels: Callable[[str, Mapping[str, str]], str] | None,
    bus: EventBus | None = None,
) -> LiveReply | None:
    """The turn's live reply, or ``None`` when its chat does not stream (off, or a channel
    that cannot edit its messages)."""
    editor = editor_of(connector)
    channel = settings.channel(key.channel)
    mode = streaming_mode(settings, key, chat_type)
    if editor is None or channel is None or mode == "off":
        return None
    overrides = channel.tool_status

    def label(tool: str) -> str:
        if labels is not None:
            return labels(tool, overrides)
        return overrides.get(tool) or f"Using {tool}…"

    return LiveReply(
        db=db,
        editor=editor,
        key=key,
        chat_type=chat_type,
        thread_id=thread_id,
        run_id=run_id,
        mode=mode,
        interval=channel.stream_interval,
        reply_to=reply_to,
        status_label=label,
        bus=bus,
    )
