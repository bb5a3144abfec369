"""stream_previews: a streamed reply's preview is open until the reply replaces it (final) or
it is deleted or marked (closed); the outbox row that replaces it carries its id."""

from __future__ import annotations

import pytest

from connectors.base import RenderedChunk, ThreadKey
from gateway.store.outbox import ThreadAddress
from tests.unit.store.contract.conftest import Backend

KEY = ThreadKey("tg", "4242", None)


@pytest.fixture
async def thread_id(store: Backend) -> int:
    row = await store.write(store.threads.upsert_thread, KEY, chat_type="dm", persona="p", now=1.0)
    return int(row.id)


async def add(store: Backend, thread_id: int, message_id: str, run_id: int | None = None) -> int:
    return await store.write(
        store.previews.add_preview,
        run_id=run_id,
        thread_id=thread_id,
        key=KEY,
        platform_message_id=message_id,
        now=2.0,
    )


async def test_open_previews_are_listed_per_thread_with_their_key_until_settled(
    store: Backend, thread_id: int
) -> None:
    first = await add(store, thread_id, "11")
    second = await add(store, thread_id, "12")
    rows = await store.read(store.previews.open_previews, thread_id)
    assert [(r.id, r.platform_message_id, r.key) for r in rows] == [(first, "11", KEY), (second, "12", KEY)]
    assert await store.read(store.previews.open_previews, thread_id + 1) == []
    await store.write(store.previews.close_preview, first, 3.0)
    assert await store.write(store.previews.finalize_preview, second, 3.0) is True
    assert await store.read(store.previews.open_previews) == []


async def test_a_settled_preview_cannot_be_finalized(store: Backend, thread_id: int) -> None:
    preview = await add(store, thread_id, "11")
    await store.write(store.previews.close_preview, preview, 3.0)
    assert await store.write(store.previews.finalize_preview, preview, 4.0) is False


async def test_only_the_first_chunk_of_a_reply_edits_the_preview(store: Backend, thread_id: int) -> None:
    chunks = [RenderedChunk(t, t, "plain") for t in ("one", "two")]
    first, second = await store.write(
        store.outbox.enqueue_chunks, ThreadAddress(thread_id, KEY), chunks, edit_of="11"
    )
    row = await store.read(store.outbox.next_pending, thread_id)
    assert row is not None and (row.id, row.edit_of) == (first, "11")
    await store.write(store.outbox.finish_row, first, "sent", platform_message_id="11", error=None, now=5.0)
    row = await store.read(store.outbox.next_pending, thread_id)
    assert row is not None and (row.id, row.edit_of) == (second, None)


async def test_posted_since_sees_rows_waiting_sent_or_created_after_the_preview_but_not_edits(
    store: Backend, thread_id: int
) -> None:
    address = ThreadAddress(thread_id, KEY)
    chunk = [RenderedChunk("old", "old", "plain")]
    (old,) = await store.write(store.outbox.enqueue_chunks, address, chunk)
    assert await store.read(store.previews.posted_since, thread_id, 0.0) is True  # still waiting
    await store.write(store.outbox.finish_row, old, "sent", platform_message_id="9", error=None, now=1.0)
    # Created and sent before the preview's posting began (``since`` far later): it is above it.
    assert await store.read(store.previews.posted_since, thread_id, 10**10) is False
    # An edit of the preview and the row that removes one post nothing new.
    (edit,) = await store.write(store.outbox.enqueue_chunks, address, chunk, edit_of="11")
    await store.write(store.outbox.finish_row, edit, "sent", platform_message_id="11", error=None, now=3.0)
    drop = await store.write(store.outbox.enqueue_drop, address, "12", mark="gone", seq=0)
    assert await store.read(store.previews.posted_since, thread_id, 10**10) is False
    row = await store.read(store.outbox.next_pending, thread_id)
    assert row is not None and (row.id, row.drops_preview, row.edit_of, row.text) == (
        drop,
        True,
        "12",
        "gone",
    )
    (fresh,) = await store.write(store.outbox.enqueue_chunks, address, chunk)
    await store.write(store.outbox.finish_row, fresh, "sent", platform_message_id="13", error=None, now=4.0)
    assert await store.read(store.previews.posted_since, thread_id, 0.0) is True
