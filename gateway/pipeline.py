"""Intake: InboundEvent -> dedupe -> thread -> message -> binding -> queue, in one commit.

The connector acknowledges the platform only after :meth:`Pipeline.ingest` returns, so a
crash before the commit means the platform redelivers, and a redelivery after the commit
is recognised by ``(channel, event_id)`` and changes nothing.

Before the commit the channel's intake limits apply (:mod:`gateway.intake_limits`): long
text is cut (the full text saved first), and a message over the chat's rate is stored
with a queue item that becomes due later, so it joins the next turn instead of starting
one of its own.

A routed message's files move from the staging folder into its thread's workspace
(:mod:`gateway.inbound_files`) right after the commit and before its turn is due;
:meth:`Pipeline.recover` finishes moves a stop or crash interrupted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from connectors.base import InboundEvent, IntakeResult, IntakeStatus, ThreadKey
from gateway import inbound_files, otel
from gateway.commands import command_of
from gateway.config import Binding, SessionScope
from gateway.intake_albums import Albums
from gateway.intake_documents import with_excerpts
from gateway.intake_limits import IntakeLimits
from gateway.intake_rate import PROMPT, Pace
from gateway.metrics import INTAKE_EVENTS
from gateway.store.db import Database
from gateway.store.messages import (
    add_message,
    album_progress,
    messages_with_staged_files,
    record_event,
    set_attachments,
)
from gateway.store.queue import defer_open_albums, enqueue_message, take_deferred_along
from gateway.store.threads import upsert_thread
from gateway.workspaces import thread_folder

log = logging.getLogger("talon.pipeline")


class Bindings:
    """Binding resolution: the chat-specific binding first, then the channel default; and
    which messages of a chat share a conversation (``session_scope``, the same way)."""

    def __init__(
        self,
        bindings: Iterable[Binding],
        personas: Iterable[str],
        scopes: Mapping[str, SessionScope | None] | None = None,
    ):
        self._by_chat: dict[tuple[str, str], str] = {}
        self._by_channel: dict[str, str] = {}
        self._personas = frozenset(personas)
        self._scopes: dict[tuple[str, str | None], SessionScope] = {
            (channel, None): scope for channel, scope in (scopes or {}).items() if scope is not None
        }
        for b in bindings:
            if b.chat is None:
                self._by_channel.setdefault(b.channel, b.persona)
            else:
                self._by_chat.setdefault((b.channel, b.chat), b.persona)
            if b.session_scope is not None:
                self._scopes.setdefault((b.channel, b.chat), b.session_scope)

    def conversation(self, event: InboundEvent) -> tuple[ThreadKey, str | None]:
        """The thread key and session of ``event``'s conversation, by its chat's ``session_scope``:
        ``topic`` (the default) the platform's own place, ``chat`` the whole chat, ``user`` the
        sender's own conversation in a group. A DM is one conversation whatever the scope."""
        key = event.thread_key
        scope = self._scopes.get((event.channel, key.chat_id)) or self._scopes.get((event.channel, None))
        if scope is None or scope == "topic" or event.chat_type == "dm":
            return key, None
        if scope == "chat":
            return ThreadKey(key.channel, key.chat_id), None
        return key, event.sender.id or None

    def resolve(self, channel: str, chat_id: str, requested: str | None = None) -> str | None:
        if requested and requested in self._personas:
            return requested
        return self._by_chat.get((channel, chat_id)) or self._by_channel.get(channel)


Notice = Callable[[int, str], Awaitable[object]]
"""Posts a short gateway message into a thread (``ChannelPoster.notice``)."""


class Pipeline:
    """Args:
    limits: the channels' intake limits; the defaults, with full texts under the
        database's ``files`` folder, when not given.
    workspaces_path: the threads' workspaces, where their inbound files go (default:
        ``workspaces`` in the database's folder).
    on_queued: work for a thread is due now.
    notice: posts the slow-down notice; without one it is only logged.
    """

    def __init__(
        self,
        db: Database,
        bindings: Bindings,
        *,
        limits: IntakeLimits | None = None,
        on_queued: Callable[[int], None] = lambda thread_id: None,
        notice: Notice | None = None,
        workspaces_path: Path | None = None,
    ):
        self.db = db
        self.bindings = bindings
        self.limits = limits or IntakeLimits(db.path.parent / "files")
        self.workspaces_path = workspaces_path or db.path.parent / "workspaces"
        self.on_queued = on_queued
        self.notice = notice
        self._wakes: dict[tuple[int, float], asyncio.TimerHandle] = {}
        self._albums = Albums()

    async def ingest(self, event: InboundEvent) -> IntakeResult:
        key = event.thread_key
        persona = self.bindings.resolve(event.channel, key.chat_id, event.persona)
        command = command_of(event.text)
        if persona is None:
            status = IntakeStatus.UNROUTED
        elif command or not event.needs_reply:
            status = IntakeStatus.STORED
        else:
            status = IntakeStatus.ACCEPTED
        if self.limits.too_long(event):
            event = await self.limits.cut(event)
        event = await with_excerpts(event)
        if persona is not None and event.attachments:
            await asyncio.to_thread(inbound_files.sync_staged, [a.path for a in event.attachments])
        album = (event.channel, key.chat_id, event.album) if event.album else None
        joins = False
        if album is not None and not command:
            joins = self._albums.answered(album, time.time())
            if not joins and not self._albums.known(album, time.time()):
                progress = await self.db.read(album_progress, *album)
                joins = progress == "open"
                if progress == "answered" and status is IntakeStatus.ACCEPTED:
                    # Redelivered after a restart, the rest of the album already answered:
                    # stored for context, not answered a second time on its own.
                    status = IntakeStatus.STORED
                    log.info(
                        "a late photo of an answered album is stored without a turn",
                        extra={"chat": key.chat_id},
                    )
            self._albums.seen(album, time.time())
        if joins and status is IntakeStatus.STORED:
            status = IntakeStatus.ACCEPTED  # a photo of an album whose caption addressed the bot
        pace = self.limits.pace(event, time.time()) if status is IntakeStatus.ACCEPTED else PROMPT
        if album and status is IntakeStatus.ACCEPTED:
            pace = self._albums.pace(album, pace, time.time())
        # Concurrent events share commits (Database.run_transaction groups them); one bad
        # event fails alone. An event's rows are its chat's, besides new rows and upserts.
        intake = _Intake(
            event, persona, status, command, pace, *self.bindings.conversation(event), otel.traceparent()
        )
        row = await self.db.run_keyed(
            ("chat", event.channel, event.thread_key.chat_id), partial(_commit_event, intake)
        )
        if row is None:
            if event.attachments:
                await self._drop_redelivered_files(event)
            INTAKE_EVENTS.labels(event.channel, IntakeStatus.DUPLICATE.value).inc()
            return IntakeResult(IntakeStatus.DUPLICATE)
        thread_id, message_id, staged = row
        INTAKE_EVENTS.labels(event.channel, status.value).inc()
        if staged is not None and persona is not None:
            try:
                await self._place(message_id, thread_id, persona, staged)
            except Exception:
                # Committed either way; the next start's recover() finishes the move.
                log.warning("could not move inbound files yet", exc_info=True, extra={"thread_id": thread_id})
        if pace.deferred:
            self._wake_at(thread_id, pace.available_at)
            notice = self.limits.notice(event, pace, time.time())
            if notice is not None:
                await self._tell_slowed(event, pace, notice, thread_id)
        elif status is IntakeStatus.ACCEPTED:
            self.on_queued(thread_id)
        elif status is IntakeStatus.UNROUTED:
            log.warning(
                "no binding for this chat; stored without a reply (add a binding to talon.yaml)",
                extra={"channel": event.channel, "chat": key.chat_id, "thread_id": thread_id},
            )
        return IntakeResult(status, thread_id, message_id)

    async def recover(self) -> int:
        """Finish moving the files of messages committed before a stop or crash, and hold
        albums cut by it for their redelivered rest (call at start, before turns run);
        returns how many messages had files to move."""
        await self._recover_albums()
        pending = await self.db.read(messages_with_staged_files)
        for item in pending:
            await self._place(item.message_id, item.thread_id, item.persona, json.loads(item.attachments))
        if pending:
            log.info("moved the inbound files of %d messages into their workspaces", len(pending))
        return len(pending)

    async def _recover_albums(self) -> None:
        now = time.time()
        until = now + self._albums.restart_hold
        albums = await self.db.run_transaction(partial(defer_open_albums, until=until, now=now))
        for thread_id, channel, chat_id, album in albums:
            self._wake_at(thread_id, self._albums.resume((channel, chat_id, album), now))
        if albums:
            log.info(
                "%d albums cut by the last stop wait %.0f s for the rest of their photos",
                len(albums),
                self._albums.restart_hold,
            )

    async def _drop_redelivered_files(self, event: InboundEvent) -> None:
        """Remove what a redelivered event downloaded again, unless the first delivery's
        message still waits for that very file to be moved (connectors reuse the name)."""
        waiting = {
            entry.get("staged")
            for item in await self.db.read(messages_with_staged_files)
            for entry in json.loads(item.attachments)
        }
        stale = [a.path for a in event.attachments if a.path not in waiting]
        await asyncio.to_thread(inbound_files.remove_staged, stale)

    async def _place(
        self, message_id: int, thread_id: int, persona: str, entries: list[dict[str, Any]]
    ) -> None:
        folder = thread_folder(self.workspaces_path, persona, thread_id)
        placed = await asyncio.to_thread(inbound_files.place, folder, entries)
        await self.db.run_transaction(
            partial(set_attachments, message_id=message_id, attachments=json.dumps(placed))
        )

    def _wake_at(self, thread_id: int, at: float) -> None:
        """Hand the thread to the queue when its deferred messages are due (the queue is
        told nothing before: it would only find them not yet due)."""
        if (thread_id, at) in self._wakes:
            return

        def wake() -> None:
            del self._wakes[(thread_id, at)]
            self.on_queued(thread_id)

        delay = max(0.0, at - time.time())
        self._wakes[(thread_id, at)] = asyncio.get_running_loop().call_later(delay, wake)

    async def _tell_slowed(self, event: InboundEvent, pace: Pace, text: str, thread_id: int) -> None:
        log.info(
            "messages over the %s rate; answering them together later",
            pace.reason,
            extra={"channel": event.channel, "chat": event.thread_key.chat_id, "thread_id": thread_id},
        )
        if self.notice is None:
            return
        try:
            await self.notice(thread_id, text)
        except Exception:
            # The message is committed either way; a lost notice must not fail its intake.
            log.warning("could not post the slow-down notice", exc_info=True, extra={"thread_id": thread_id})


@dataclass(frozen=True, slots=True)
class _Intake:
    event: InboundEvent
    persona: str | None
    status: IntakeStatus
    command: str | None
    pace: Pace
    key: ThreadKey  # the conversation's thread key (session_scope chat drops the topic)
    session: str | None  # the sender, for session_scope user
    trace_parent: str | None = None  # the intake span, which the message's turn continues


def _commit_event(
    intake: _Intake, conn: sqlite3.Connection
) -> tuple[int, int, list[dict[str, Any]] | None] | None:
    """One event's rows (runs on the database thread): thread, message and the files to move
    into the thread's workspace (None when there are none). None for a duplicate."""
    event, persona, status, command = intake.event, intake.persona, intake.status, intake.command
    pace = intake.pace
    now = time.time()
    if not record_event(conn, event.channel, event.event_id, command or status.value, now):
        return None
    thread_id = upsert_thread(
        conn,
        intake.key,
        chat_type=event.chat_type,
        persona=persona,
        now=now,
        rebind=True,
        session=intake.session,
    ).id
    attachments = json.dumps([asdict(a) for a in event.attachments]) if event.attachments else None
    message_id = add_message(
        conn,
        thread_id,
        "user",
        event.text,
        created_at=event.received_at,
        sender_id=event.sender.id,
        sender_name=event.sender.display_name,
        persona=persona,
        platform_message_id=event.platform_message_id,
        reply_to=event.reply_to,
        attachments=attachments,
        event_id=event.event_id,
        album=event.album,
    )
    staged = None
    if attachments is not None and persona is not None:
        staged = inbound_files.plan([asdict(a) for a in event.attachments], message_id)
        set_attachments(conn, message_id, json.dumps(staged))
    if status is IntakeStatus.ACCEPTED:
        if pace.catch_up:
            # This message starts a turn anyway: messages deferred by the rate (never
            # leased, so not retries in backoff) ride along instead of waiting ahead of it.
            take_deferred_along(conn, thread_id, now)
        enqueue_message(conn, thread_id, message_id, available_at=pace.due(now), now=now)
        otel.keep(conn, "message", message_id, intake.trace_parent)
    return thread_id, message_id, staged
