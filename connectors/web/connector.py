"""The web chat channel: a chat page and an embeddable widget, served by the HTTP server.

Its "platform" is the gateway itself. Each visitor (a signed cookie) is one chat. What the
pages show is kept in ``web_messages`` (:mod:`gateway.store.web_chat`): a delivery writes a
row keyed by its outbox id, so a delivery repeated after a crash is the same message
(``idempotent_send``), and a page follows its chat through an event stream that resumes after
the last change it saw (:mod:`connectors.web.routes`). Streamed replies edit a preview row.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from functools import partial
from pathlib import Path
from typing import Any

from aiohttp import web

from connectors.base import (
    Attachment,
    ChatType,
    ConnectorHealth,
    ErrorClass,
    InboundEvent,
    IntakeHandler,
    IntakeResult,
    OutboundChunk,
    OutboundFile,
    RenderedChunk,
    Sender,
    SendResult,
    ThreadKey,
)
from connectors.streaming import NativeStream
from connectors.web.access import SiteAccess, Visitors, load_key, origin_of
from connectors.web.html import render_chunks
from gateway.config import WebChannel
from gateway.inbound_files import inbox_name
from gateway.store.db import Database
from gateway.store.web_chat import (
    WebMessage,
    WebMessageIn,
    add_message,
    changes_since,
    delete_message,
    edit_message,
    message_by_id,
)

__all__ = ["WebConnector", "WebEditor"]

log = logging.getLogger("talon.connectors.web")

Wake = dict[str, Any]


class WebConnector:
    """One ``type: web`` channel: a connector, and an HTTP feature adding its routes.

    Args:
        settings: the channel's settings from talon.yaml.
        files_dir: the staging folder inbound files are written to (``<channel>/<chat>/``).
        db: the store, for ``web_messages``.
        data_path: the data dir: the cookie key and the copies of files sent to visitors.
        public_url: ``http.public_url``; an ``https://`` one makes the cookie fit for other sites.
    """

    idempotent_send = True

    def __init__(
        self,
        settings: WebChannel,
        *,
        files_dir: Path,
        db: Database,
        data_path: Path,
        public_url: str | None = None,
    ) -> None:
        self.name = settings.name
        self.health = ConnectorHealth()
        self.max_file_bytes = settings.max_upload_bytes
        self.settings = settings
        self.db = db
        self.files_dir = files_dir
        self.out_dir = data_path / "web-chat" / settings.name
        self.sites = SiteAccess(settings.sites)
        self.secure_cookie = bool(public_url and public_url.startswith("https://"))
        self.public_origin = origin_of(public_url) if public_url else None
        self._data_path = data_path
        self._visitors: Visitors | None = None
        self._intake: IntakeHandler | None = None
        self._streams: dict[str, set[asyncio.Queue[Wake]]] = {}
        self.message_editor = WebEditor(self)

    # ---------------------------------------------------------------- the HTTP feature

    def install(self, app: web.Application) -> None:
        """Add the chat's routes under ``/chat/<name>/`` (:mod:`connectors.web.routes`)."""
        from connectors.web.routes import install_routes

        install_routes(app, self)

    @property
    def visitors(self) -> Visitors:
        if self._visitors is None:
            self._visitors = Visitors(self.name, load_key(self._data_path))
        return self._visitors

    # ---------------------------------------------------------------- the connector

    async def start(self, intake: IntakeHandler) -> None:
        await asyncio.to_thread(lambda: self.visitors)  # the key file, off the loop
        self._intake = intake
        self.health.set("connected")

    async def stop(self) -> None:
        self._intake = None
        self.end_streams()
        self.health.set("stopped")

    def render(self, markdown: str) -> list[RenderedChunk]:
        """Markdown -> sanitized HTML (:mod:`connectors.web.html`), with plain twins."""
        return render_chunks(markdown)

    async def send(self, item: OutboundChunk) -> SendResult:
        chunk = item.chunk
        body = chunk.text if chunk.format == "html" else chunk.plain
        fmt = "html" if chunk.format == "html" else "plain"
        message = WebMessageIn(self.name, item.thread.chat_id, "bot", fmt, body, delivery_id=item.delivery_id)
        added, _ = await self.db.run_transaction(add_message, message, time.time())
        self._wake(added.chat_id)
        return SendResult.sent(str(added.id))

    async def send_file(self, item: OutboundFile) -> SendResult:
        """Keep a copy the visitor downloads (the outbox's copy goes once the row is done)."""
        name = inbox_name(item.name)
        dest = self.out_dir / str(item.delivery_id) / name
        try:
            await asyncio.to_thread(_copy, Path(item.path), dest)
        except OSError as exc:
            return SendResult.failed(ErrorClass.TRANSIENT, f"cannot keep the file for the chat: {exc}")
        message = WebMessageIn(
            self.name,
            item.thread.chat_id,
            "bot",
            "file",
            name,
            delivery_id=item.delivery_id,
            file_path=str(dest),
            file_name=name,
            file_size=item.size,
        )
        added, _ = await self.db.run_transaction(add_message, message, time.time())
        self._wake(added.chat_id)
        return SendResult.sent(str(added.id))

    async def set_working(self, thread: ThreadKey, working: bool) -> None:
        self._publish(thread.chat_id, {"working": working})

    # ---------------------------------------------------------------- for the routes

    def thread_key(self, visitor: str) -> ThreadKey:
        return ThreadKey(self.name, visitor, None)

    async def submit(
        self,
        visitor: str,
        event_id: str,
        text: str,
        attachments: tuple[Attachment, ...] = (),
        *,
        sender: Sender | None = None,
    ) -> IntakeResult:
        """A message posted in the chat ``visitor`` (a visitor's id, or a signed-in console
        user's :func:`connectors.web.access.user_chat`) by ``sender`` (the visitor when not
        given); ``event_id`` (the page's) makes a retried post a no-op.

        Raises:
            RuntimeError: the channel is not running (the gateway is stopping).
        """
        intake = self._intake
        if intake is None:
            raise RuntimeError("the web chat is not running")
        event = InboundEvent(
            channel=self.name,
            event_id=f"{visitor}:{event_id}",
            thread_key=self.thread_key(visitor),
            chat_type="dm",
            sender=sender or Sender(id=visitor, display_name="visitor"),
            text=text,
            attachments=attachments,
            platform_message_id=event_id,
        )
        result = await intake(event)  # committed: only now is the message shown as sent
        shown = text or " ".join(f"[{a.name}]" for a in attachments)
        mine = WebMessageIn(self.name, visitor, "user", "plain", shown, event_id=event_id)
        await self.db.run_transaction(add_message, mine, time.time())
        self._wake(visitor)
        return result

    async def changes(self, visitor: str, after: int, limit: int) -> list[WebMessage]:
        return await self.db.read(changes_since, self.name, visitor, after, limit)

    async def message(self, message_id: int) -> WebMessage | None:
        return await self.db.read(message_by_id, self.name, message_id)

    def open_stream(self, visitor: str, queue: asyncio.Queue[Wake]) -> bool:
        """Register an event stream of the visitor's for their chat's wake-ups (:meth:`_wake`);
        False when they hold the most allowed."""
        streams = self._streams.setdefault(visitor, set())
        if len(streams) >= self.settings.max_streams_per_visitor:
            return False
        streams.add(queue)
        return True

    def close_stream(self, visitor: str, queue: asyncio.Queue[Wake]) -> None:
        streams = self._streams.get(visitor, set())
        streams.discard(queue)
        if not streams:
            self._streams.pop(visitor, None)

    def end_streams(self) -> None:
        """Every open event stream ends (the pages reconnect and resume)."""
        for streams in self._streams.values():
            for queue in streams:
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait({"close": True})

    def _wake(self, chat_id: str) -> None:
        """Streams of the chat read its changes (``{}``); ``{"working": bool}`` is the typing
        indicator, ``{"close": True}`` ends a stream."""
        self._publish(chat_id, {})

    def _publish(self, chat_id: str, wake: Wake) -> None:
        for queue in self._streams.get(chat_id, ()):
            with contextlib.suppress(asyncio.QueueFull):  # one that fell behind reads the store anyway
                queue.put_nowait(wake)


class WebEditor:
    """The :class:`connectors.streaming.MessageEditor` of a web chat: previews are rows."""

    def __init__(self, connector: WebConnector) -> None:
        self._c = connector

    def min_interval(self, thread: ThreadKey) -> float:
        return 0.2

    def preview_limit(self) -> int:
        return 30_000

    async def post(self, thread: ThreadKey, text: str, reply_to: str | None) -> SendResult:
        message = WebMessageIn(self._c.name, thread.chat_id, "bot", "plain", text)
        added, _ = await self._c.db.run_transaction(add_message, message, time.time())
        self._c._wake(thread.chat_id)
        return SendResult.sent(str(added.id))

    async def edit(self, thread: ThreadKey, message_id: str, chunk: RenderedChunk) -> SendResult:
        if not message_id.isdigit():
            return SendResult.failed(ErrorClass.PERMANENT, f"no message {message_id!r} in this chat")
        fmt = "html" if chunk.format == "html" else "plain"
        body = chunk.text if fmt == "html" else chunk.plain
        edit = partial(edit_message, channel=self._c.name, chat_id=thread.chat_id, message_id=int(message_id))
        edited = await self._c.db.run_transaction(edit, fmt=fmt, body=body)
        if edited is None:
            return SendResult.failed(ErrorClass.PERMANENT, f"message {message_id} is gone")
        self._c._wake(thread.chat_id)
        return SendResult.sent(message_id)

    async def delete(self, thread: ThreadKey, message_id: str) -> SendResult:
        if message_id.isdigit():
            await self._c.db.run_transaction(delete_message, self._c.name, thread.chat_id, int(message_id))
            self._c._wake(thread.chat_id)
        return SendResult.sent(message_id)

    def native(self, thread: ThreadKey, chat_type: ChatType) -> NativeStream | None:
        return None  # previews are edited; the page shows each edit as it lands


def _copy(source: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    shutil.copyfile(source, tmp)
    tmp.replace(dest)
