"""Live progress: a foreground child's emit_progress, published on the thread's event bus by
the child service, becomes the status line of the parent turn's preview."""

from __future__ import annotations

import asyncio
from pathlib import Path

from connectors.base import ChatType, RenderedChunk, SendResult, ThreadKey
from connectors.streaming import NativeStream
from gateway.children.service import Children
from gateway.config import load_settings
from gateway.events import EventBus
from gateway.live_reply import LiveReply
from gateway.store.db import open_database
from gateway.store.threads import upsert_thread
from tests.harness import write_config

KEY = ThreadKey("tg", "4242")


class Chat:
    """A chat that keeps the bot's one message (our connector contract, not a library)."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def min_interval(self, thread: ThreadKey) -> float:
        return 0.05

    def preview_limit(self) -> int:
        return 4000

    async def post(self, thread: ThreadKey, text: str, reply_to: str | None) -> SendResult:
        self.texts.append(text)
        return SendResult.sent("1")

    async def edit(self, thread: ThreadKey, message_id: str, chunk: RenderedChunk) -> SendResult:
        self.texts.append(chunk.plain)
        return SendResult.sent(message_id)

    async def delete(self, thread: ThreadKey, message_id: str) -> SendResult:
        return SendResult.sent(message_id)

    def native(self, thread: ThreadKey, chat_type: ChatType) -> NativeStream | None:
        return None


async def test_a_childs_progress_is_the_parent_previews_status(tmp_path: Path) -> None:
    settings = load_settings(write_config(tmp_path, provider={"type": "anthropic", "api_key": "k"}))
    db = await open_database(tmp_path / "talon.db")
    try:
        thread = await db.run_transaction(upsert_thread, KEY, chat_type="dm", persona="p", now=1.0)
        bus = EventBus()
        children = Children(db=db, settings=settings, providers={}, delegation=None, bus=bus)  # type: ignore[arg-type]
        chat = Chat()
        live = LiveReply(
            db=db,
            editor=chat,
            key=KEY,
            chat_type="dm",
            thread_id=thread.id,
            run_id=None,
            mode="edit",
            interval=0.05,
            reply_to=None,
            status_label=lambda tool: "Asking a helper agent…",
            bus=bus,
        )
        live.tool_started("agent")
        await asyncio.sleep(0.1)
        children._progress[77] = []  # a running foreground child that asked for progress events
        children._progress_threads[77] = thread.id
        children.progress(77, {"message": "Read 3 of 5 files"})
        await asyncio.sleep(0.1)
        await live.close()
        children.progress(77, {"message": "after the turn"})  # nobody listens any more: no error
    finally:
        await db.close()
    assert chat.texts == ["⏳ Asking a helper agent…", "⏳ Read 3 of 5 files"]
