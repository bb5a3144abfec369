"""outbox: rows per chunk, sent in order per thread; marked sending before a platform call,
settled after it, recovered after a stop."""

from __future__ import annotations

import pytest

from connectors.base import RenderedChunk, ThreadKey
from gateway.store.outbox import ThreadAddress
from tests.unit.store.contract.conftest import Backend

KEY = ThreadKey("tg", "-100", "77")


@pytest.fixture
async def address(store: Backend) -> ThreadAddress:
    row = await store.write(store.threads.upsert_thread, KEY, chat_type="thread", persona="p", now=1.0)
    return ThreadAddress(row.id, KEY)


async def enqueue(
    store: Backend, address: ThreadAddress, *texts: str, reply_to: str | None = None
) -> list[int]:
    chunks = [RenderedChunk(f"<b>{t}</b>", t, "html") for t in texts]
    return await store.write(store.outbox.enqueue_chunks, address, chunks, reply_to=reply_to)


async def test_chunks_come_out_in_order_with_their_key_and_only_the_first_quotes(
    store: Backend, address: ThreadAddress
) -> None:
    first, second = await enqueue(store, address, "one", "two", reply_to="m-9")
    row = await store.read(store.outbox.next_pending, address.thread_id)
    assert row is not None
    assert (row.id, row.seq, row.text, row.plain, row.format, row.reply_to) == (
        first,
        0,
        "<b>one</b>",
        "one",
        "html",
        "m-9",
    )
    assert (row.key, row.status, row.attempts) == (KEY, "pending", 0)
    await store.write(store.outbox.mark_sending, first)
    after = await store.read(store.outbox.next_pending, address.thread_id)
    assert after is not None and (after.id, after.seq, after.reply_to) == (second, 1, None)


async def test_a_sent_row_is_done_and_the_next_one_follows(store: Backend, address: ThreadAddress) -> None:
    first, second = await enqueue(store, address, "one", "two")
    await store.write(store.outbox.mark_sending, first)
    await store.write(store.outbox.finish_row, first, "sent", platform_message_id="p-1", error=None, now=2.0)
    nxt = await store.read(store.outbox.next_pending, address.thread_id)
    assert nxt is not None and nxt.id == second
    await store.write(
        store.outbox.finish_row, second, "failed", platform_message_id=None, error="403", now=3.0
    )
    assert await store.read(store.outbox.next_pending, address.thread_id) is None
    assert await store.read(store.outbox.count_by_status) == {"failed": 1}


async def test_a_retry_stays_first_in_line_with_its_new_time(store: Backend, address: ThreadAddress) -> None:
    first, _ = await enqueue(store, address, "one", "two")
    await store.write(store.outbox.retry_row, first, available_at=50.0, error="429")
    row = await store.read(store.outbox.next_pending, address.thread_id)
    assert row is not None and (row.id, row.attempts, row.available_at) == (first, 1, 50.0)


async def test_rows_left_sending_are_resent_only_where_that_is_safe(
    store: Backend, address: ThreadAddress
) -> None:
    other = await store.write(
        store.threads.upsert_thread, ThreadKey("slack", "C1"), chat_type="dm", persona="p", now=1.0
    )
    (safe,) = await enqueue(store, address, "safe")
    (unsafe,) = await enqueue(store, ThreadAddress(other.id, other.key), "unsafe")
    for row_id in (safe, unsafe):
        await store.write(store.outbox.mark_sending, row_id)
    assert await store.read(store.outbox.threads_with_pending) == []
    assert await store.read(store.outbox.count_by_status) == {"sending": 2}
    interrupted = await store.read(store.outbox.interrupted_rows)
    assert [(r.id, r.channel) for r in interrupted] == [(safe, "tg"), (unsafe, "slack")]
    await store.write(store.outbox.settle_interrupted, safe, resend=True, error="not resent")
    await store.write(store.outbox.settle_interrupted, unsafe, resend=False, error="not resent")
    assert await store.read(store.outbox.interrupted_rows) == []
    assert await store.read(store.outbox.threads_with_pending) == [address.thread_id]
    assert await store.read(store.outbox.count_by_status) == {"pending": 1, "unknown": 1}
