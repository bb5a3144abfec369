"""The local console channel: ``talon chat`` talks to it over the daemon's control socket.

Its "platform" is the gateway itself: a console thread is named by the user
(``--thread``), deliveries are pushed to the clients attached to that thread, and the
outbox keeps the history. Clients drop deliveries they already have (by delivery id),
so a delivery interrupted by a crash can safely be repeated (``idempotent_send``).

A delivery no window printed is not lost: windows confirm what they showed (:meth:`seen`),
and a window that opens the thread is first handed the rest (:meth:`unseen`).

While the model writes, the windows are sent a preview that grows (``streaming``, on by
default as in DMs; :mod:`connectors.console_stream`), which the reply then replaces.

Replies are delivered as the model wrote them (the window renders them, ``talon chat -m``
prints them as they are); only a reply past the console's limit is cut into chunks by the
Markdown renderer, which closes and reopens what a cut would break.
"""

from __future__ import annotations

import asyncio
import functools
import getpass
import uuid
from contextlib import AbstractContextManager
from typing import Any

from connectors.base import (
    ConnectorHealth,
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
from connectors.console_stream import ConsoleEditor
from gateway.store.console import mark_seen, unseen_rows
from gateway.store.db import Database
from gateway.subscriptions import Subscriptions

Delivery = dict[str, Any]

BACKLOG = 200
"""The most unseen chunks a window that opens a thread is shown (the newest ones)."""


class ConsoleConnector:
    idempotent_send = True
    # A console window cannot show a file; it is told the file's name and size instead.
    max_file_bytes = 50_000_000

    def __init__(self, name: str, db: Database):
        self.name = name
        self.db = db
        self.health = ConnectorHealth()
        self._intake: IntakeHandler | None = None
        self._listeners: Subscriptions[str, Delivery] = Subscriptions()
        self.message_editor = ConsoleEditor(self._listeners.publish)  # streamed replies

    async def start(self, intake: IntakeHandler) -> None:
        self._intake = intake
        self.health.set("connected")

    async def stop(self) -> None:
        self._intake = None
        self.health.set("stopped")

    def thread_key(self, thread: str) -> ThreadKey:
        return ThreadKey(self.name, thread, None)

    async def submit(
        self,
        thread: str,
        text: str,
        *,
        event_id: str | None = None,
        persona: str | None = None,
        user: str | None = None,
    ) -> IntakeResult:
        """A line typed by the local user. ``event_id`` lets a client retry safely."""
        if self._intake is None:
            raise RuntimeError("console channel is not running")
        who = user or _local_user()
        event = InboundEvent(
            channel=self.name,
            event_id=event_id or uuid.uuid4().hex,
            thread_key=self.thread_key(thread),
            chat_type="dm",
            sender=Sender(id=f"local:{who}", display_name=who),
            text=text,
            persona=persona,
        )
        return await self._intake(event)

    def render(self, markdown: str) -> list[RenderedChunk]:
        from connectors.render import LIMITS, plain_text, render_markdown, utf16_len

        if not markdown.strip():
            return []
        if utf16_len(markdown) <= LIMITS["console"]:
            return [RenderedChunk(markdown, plain_text(markdown), "markdown")]
        return render_markdown(markdown, "console")

    async def send(self, item: OutboundChunk) -> SendResult:
        delivery: Delivery = {"type": "message", "id": item.delivery_id, "text": item.chunk.text}
        if item.replaces is not None:
            delivery["replaces"] = item.replaces
        self._listeners.publish(item.thread.chat_id, delivery)
        return SendResult.sent(str(item.delivery_id))

    async def send_file(self, item: OutboundFile) -> SendResult:
        text = f"[file {item.name}, {item.size} bytes]"
        self._listeners.publish(
            item.thread.chat_id, {"type": "message", "id": item.delivery_id, "text": text}
        )
        return SendResult.sent(str(item.delivery_id))

    async def set_working(self, thread: ThreadKey, working: bool) -> None:
        self._listeners.publish(thread.chat_id, {"type": "working", "on": working})

    def attach(
        self, thread: str, queue: asyncio.Queue[Delivery] | None = None
    ) -> AbstractContextManager[asyncio.Queue[Delivery]]:
        """Receive this thread's deliveries (into ``queue`` when given) while the context is open."""
        return self._listeners.subscribe(thread, queue)

    async def unseen(self, thread: str) -> tuple[list[Delivery], int]:
        """The thread's deliveries no window confirmed (the newest :data:`BACKLOG`), as
        :meth:`attach` would have delivered them, and how many older ones were left out."""
        found = await self.db.read(unseen_rows, self.thread_key(thread), BACKLOG)
        return [{"type": "message", "id": row.id, "text": row.text} for row in found.rows], found.left_out

    async def seen(self, thread: str, upto: int) -> None:
        """A window printed the thread's deliveries up to delivery id ``upto``."""
        await self.db.run_transaction(mark_seen, self.thread_key(thread), upto)


@functools.cache
def _local_user() -> str:
    """The daemon's user, for lines typed without a name (looked up once: it can't change)."""
    return getpass.getuser()
