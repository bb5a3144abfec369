"""Posting into a channel outside a reply: ``channel_send``, ``talon send`` and the gateway's notices.

A post is recorded on the recipient thread (so that thread's persona sees it later) and
committed to the outbox in the same transaction, then rendered and delivered like any reply.
A notice ("Stopped.", "Nothing is running.") goes into a thread's outbox without being
recorded as a message. Files attached to a post become outbox rows of their own after its
text, each checked against the channel's ``max_upload_bytes`` and copied into the outbox's
spool before anything is committed.

The recipient rules are :meth:`ChannelPoster.recipient`: the chat asked for, else the asking
conversation when it is on that channel, else the channel's ``home_chat``. A refusal raises
:class:`NotifyError`, worded for whoever asked: an operator at ``talon send`` can pass
``--chat``, a persona can send to its own conversation's channel.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from connectors.base import Connector, ThreadKey
from gateway.config import Settings
from gateway.errors import RefusedError
from gateway.outbox import Outbox, ThreadAddress, enqueue_chunks, enqueue_files
from gateway.outbox_spool import FileSource, FileTooLargeError
from gateway.pipeline import Bindings
from gateway.store.db import Database
from gateway.store.messages import add_message
from gateway.store.outbox import OutboxFile
from gateway.store.threads import ThreadRow, get_thread, upsert_thread

__all__ = ["OPERATOR", "PERSONA", "ChannelPoster", "NotifyError", "Posted", "Wording"]


class NotifyError(RefusedError):
    """The message cannot be posted; the text says what to change."""


@dataclass(frozen=True, slots=True)
class Posted:
    """Where a post went: the recipient thread, its stored message, its text rows and its files."""

    thread_id: int
    message_id: int
    outbox_ids: list[int]
    key: ThreadKey
    files: tuple[OutboxFile, ...] = ()


@dataclass(frozen=True, slots=True)
class Wording:
    """How each refusal reads to one kind of sender.

    Templates take ``channel``; ``unknown_channel`` also ``names`` (the configured channels),
    ``no_recipient`` also ``alternative`` (what the sender could do instead).
    """

    unknown_channel: str
    no_recipient: str
    empty: str
    too_large: str = (
        "{shown} is {size:,} bytes; channel {channel!r} ({kind}) accepts files up to {limit:,} bytes "
        "(max_upload_bytes in talon.yaml): send a smaller file, or split or compress it"
    )


OPERATOR = Wording(
    unknown_channel="no channel named {channel!r}; use one of {names}",
    no_recipient="channel {channel!r} has no home_chat; pass --chat ID or set home_chat",
    empty="the message is empty",
)
"""``talon send``: the operator names the chat with ``--chat``."""

PERSONA = Wording(
    unknown_channel="unknown channel {channel!r}; configured channels: {names}",
    no_recipient=(
        "channel {channel!r} has no home_chat and is not this conversation's channel; "
        "set home_chat for it in talon.yaml or {alternative}"
    ),
    empty="content is empty; pass the Markdown message to send",
)
"""``channel_send``: the model sees the text as the tool's error result."""


class ChannelPoster:
    """The one way to post into a channel; also the daemon's :class:`tools.base.HostServices`.

    Args:
        db (:class:`gateway.store.db.Database`): The daemon's database.
        settings (:class:`gateway.config.Settings`): The configured channels.
        connectors (Mapping[:obj:`str`, :class:`connectors.base.Connector`]): Running channels by name.
        outbox (:class:`gateway.outbox.Outbox`): Delivers what is posted.
        bindings (:class:`gateway.pipeline.Bindings`): The persona of a thread a post creates.
    """

    def __init__(
        self,
        *,
        db: Database,
        settings: Settings,
        connectors: Mapping[str, Connector],
        outbox: Outbox,
        bindings: Bindings,
    ):
        self.db = db
        self.settings = settings
        self.connectors = connectors
        self.outbox = outbox
        self.bindings = bindings

    def recipient(
        self, channel: str, chat: str | None, origin: ThreadRow | None, wording: Wording
    ) -> ThreadKey:
        """The thread a post to ``channel`` goes to: ``chat`` when given, else ``origin`` (the
        asking conversation) when it is on ``channel``, else the channel's ``home_chat``.

        Raises:
            NotifyError: The channel is not configured, or none of these applies.
        """
        settings = self.settings.channel(channel)
        if settings is None:
            names = ", ".join(c.name for c in self.settings.channels) or "(none)"
            raise NotifyError(wording.unknown_channel.format(channel=channel, names=names))
        if chat:
            return ThreadKey(channel, str(chat))
        if origin is not None and origin.channel == channel:
            return origin.key
        if settings.home_chat:
            return ThreadKey(channel, str(settings.home_chat))
        alternative = (
            f"send to {origin.channel!r}" if origin is not None else "choose a channel that has a home_chat"
        )
        raise NotifyError(wording.no_recipient.format(channel=channel, alternative=alternative))

    async def notify(self, channel: str, chat: str | None, text: str) -> Posted:
        """``talon send``: post ``text`` into ``chat`` of ``channel`` (its ``home_chat`` when
        ``chat`` is None) as a notification.

        Raises:
            NotifyError: With a message naming what to change.
        """
        key = self.recipient(channel, chat, None, OPERATOR)
        return await self._post(key, text, OPERATOR, note="[notification]")

    async def send_to_channel(
        self,
        *,
        channel: str,
        markdown: str,
        origin_thread_id: int | None,
        persona: str | None,
        chat_id: str | None = None,
        reply_to: str | None = None,
        attachments: Sequence[FileSource] = (),
    ) -> dict[str, Any]:
        """``channel_send`` (:class:`tools.base.HostServices`): post ``markdown`` and
        ``attachments`` into ``channel`` for ``persona`` talking on thread ``origin_thread_id``.

        The stored copy notes who sent it from where, so the recipient thread's persona sees
        it in context.

        Raises:
            NotifyError: With a message the model can act on.
        """
        origin = await self.db.read(get_thread, origin_thread_id) if origin_thread_id is not None else None
        key = self.recipient(channel, chat_id, origin, PERSONA)
        where = f"{origin.channel}:{origin.chat_id}" if origin is not None else "outside a conversation"
        posted = await self._post(
            key,
            markdown,
            PERSONA,
            persona=persona,
            reply_to=reply_to,
            note=f"[channel_send from persona {persona or '-'} in {where}]",
            attachments=attachments,
        )
        result: dict[str, Any] = {
            "sent": True,
            "channel": channel,
            "chat": key.chat_id,
            "threadId": posted.thread_id,
            "messages": len(posted.outbox_ids),
        }
        if posted.files:
            result["files"] = [{"name": f.name, "bytes": f.size, "sha256": f.sha256} for f in posted.files]
        return result

    async def notice(self, thread_id: int, markdown: str) -> list[int]:
        """A short gateway message (not from the model) into a thread; returns its outbox ids,
        none when the thread's channel is not running."""
        thread = await self.db.read(get_thread, thread_id)
        if thread is None:
            raise LookupError(f"thread {thread_id} vanished")
        key = thread.key
        connector = self.connectors.get(key.channel)
        if connector is None:
            return []
        chunks = connector.render(markdown)
        ids = await self.db.run_transaction(
            partial(enqueue_chunks, address=ThreadAddress(thread_id, key), chunks=chunks)
        )
        self.outbox.notify(thread_id)
        return ids

    async def _post(
        self,
        key: ThreadKey,
        markdown: str,
        wording: Wording,
        *,
        persona: str | None = None,
        reply_to: str | None = None,
        note: str | None = None,
        attachments: Sequence[FileSource] = (),
    ) -> Posted:
        """Record and deliver ``markdown`` and ``attachments`` to ``key``. ``note`` prefixes the
        stored copy (e.g. who sent it) without changing what the chat shows."""
        connector = self.connectors.get(key.channel)
        if connector is None:
            raise NotifyError(f"channel {key.channel!r} is not running; check `talon status`")
        if not markdown.strip() and not attachments:
            raise NotifyError(wording.empty)
        self._check_sizes(connector, key.channel, attachments, wording)
        chunks = connector.render(markdown) if markdown.strip() else []
        bound = self.bindings.resolve(key.channel, key.chat_id)
        files = await self._spool(connector, key.channel, attachments, wording)
        listed = [
            f"[attached {f.name} ({f.size} bytes) from {a.shown}]"
            for f, a in zip(files, attachments, strict=True)
        ]
        text = markdown if markdown.strip() else ""
        stored = "\n\n".join(part for part in (note, text, "\n".join(listed)) if part)

        def commit(conn: sqlite3.Connection) -> tuple[int, int, list[int]]:
            now = time.time()
            thread_id = upsert_thread(conn, key, chat_type="group", persona=bound, now=now).id
            message_id = add_message(conn, thread_id, "assistant", stored, created_at=now, persona=persona)
            address = ThreadAddress(thread_id, key)
            ids = enqueue_chunks(conn, address, chunks, message_id=message_id, reply_to=reply_to)
            enqueue_files(conn, address, files, message_id=message_id, first_seq=len(chunks))
            return thread_id, message_id, ids

        try:
            thread_id, message_id, ids = await self.db.run_transaction(commit)
        except BaseException:
            await self.outbox.spool.discard([f.path for f in files])
            raise
        self.outbox.notify(thread_id)
        return Posted(thread_id, message_id, ids, key, tuple(files))

    def _check_sizes(
        self, connector: Connector, channel: str, attachments: Sequence[FileSource], wording: Wording
    ) -> None:
        """Refuse the whole post, before anything is copied or queued, when a file is too large."""
        limit = connector.max_file_bytes
        for source in attachments:
            if source.size > limit:
                raise NotifyError(self._too_large(source, source.size, channel, limit, wording))

    async def _spool(
        self, connector: Connector, channel: str, attachments: Sequence[FileSource], wording: Wording
    ) -> list[OutboxFile]:
        """The outbox's copies of ``attachments``; none are left behind when one fails."""
        files: list[OutboxFile] = []
        try:
            for source in attachments:
                try:
                    files.append(await self.outbox.spool.take(source, connector.max_file_bytes))
                except FileTooLargeError as exc:
                    limit = connector.max_file_bytes
                    raise NotifyError(self._too_large(source, exc.size, channel, limit, wording)) from None
        except BaseException:
            await self.outbox.spool.discard([f.path for f in files])
            raise
        return files

    def _too_large(self, source: FileSource, size: int, channel: str, limit: int, wording: Wording) -> str:
        settings = self.settings.channel(channel)
        kind = settings.type if settings is not None else "channel"
        return wording.too_large.format(
            shown=source.shown, size=size, channel=channel, kind=kind, limit=limit
        )
