"""Posting into a channel outside a reply: notifications, cross-channel sends.

One path for ``talon send`` and the ``channel_send`` tool: the message is recorded on
the recipient thread (so that thread's persona sees it later) and committed to the
outbox in the same transaction, then rendered and delivered like any reply.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass

from connectors.base import Connector, ThreadKey
from gateway.errors import RefusedError
from gateway.outbox import Outbox, ThreadAddress, enqueue_chunks
from gateway.pipeline import Bindings
from gateway.store.db import Database
from gateway.store.messages import add_message
from gateway.store.threads import upsert_thread


class NotifyError(RefusedError):
    """The message cannot be posted; the text says what to change."""


@dataclass(frozen=True, slots=True)
class Posted:
    thread_id: int
    message_id: int
    outbox_ids: list[int]
    key: ThreadKey


async def post_to_channel(
    *,
    db: Database,
    connectors: Mapping[str, Connector],
    outbox: Outbox,
    bindings: Bindings,
    key: ThreadKey,
    markdown: str,
    persona: str | None = None,
    reply_to: str | None = None,
    note: str | None = None,
) -> Posted:
    """Record and deliver ``markdown`` to ``key``. ``note`` prefixes the stored copy
    (e.g. who sent it) without changing what the chat shows."""
    connector = connectors.get(key.channel)
    if connector is None:
        raise NotifyError(f"channel {key.channel!r} is not running; check `talon status`")
    if not markdown.strip():
        raise NotifyError("the message is empty")
    chunks = connector.render(markdown)
    bound = bindings.resolve(key.channel, key.chat_id)
    stored = f"{note}\n\n{markdown}" if note else markdown

    def commit(conn: sqlite3.Connection) -> tuple[int, int, list[int]]:
        now = time.time()
        thread_id = upsert_thread(conn, key, chat_type="group", persona=bound, now=now).id
        message_id = add_message(conn, thread_id, "assistant", stored, created_at=now, persona=persona)
        ids = enqueue_chunks(
            conn, ThreadAddress(thread_id, key), chunks, message_id=message_id, reply_to=reply_to
        )
        return thread_id, message_id, ids

    thread_id, message_id, ids = await db.run_transaction(commit)
    outbox.notify(thread_id)
    return Posted(thread_id, message_id, ids, key)
