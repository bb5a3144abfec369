"""queue_items: a per-thread FIFO leased in batches, completed, retried, dead-lettered and
recovered after a stop."""

from __future__ import annotations

import pytest

from connectors.base import ThreadKey
from gateway.store.queue import Batch
from tests.unit.store.contract.conftest import Backend

LEASE = 60.0


async def new_thread(store: Backend, chat: str = "chat") -> int:
    row = await store.write(
        store.threads.upsert_thread, ThreadKey("c", chat), chat_type="dm", persona="p", now=1.0
    )
    return row.id


async def message(store: Backend, thread_id: int, text: str = "hi", *, due: float = 10.0) -> tuple[int, int]:
    """(message id, queue item id) of a stored user message with its work."""

    def add(conn):  # type: ignore[no-untyped-def]
        message_id = store.messages.add_message(conn, thread_id, "user", text, created_at=1.0)
        return message_id, store.queue.enqueue_message(conn, thread_id, message_id, available_at=due, now=1.0)

    return await store.write(add)


async def lease(store: Backend, thread_id: int, now: float = 10.0) -> Batch | float | None:
    return await store.write(store.queue.lease_batch, thread_id, LEASE, now)


@pytest.fixture
async def thread_id(store: Backend) -> int:
    return await new_thread(store)


async def test_consecutive_messages_are_leased_together_and_counted_as_an_attempt(
    store: Backend, thread_id: int
) -> None:
    (m1, q1), (m2, q2) = await message(store, thread_id, "one"), await message(store, thread_id, "two")
    batch = await lease(store, thread_id)
    assert isinstance(batch, Batch)
    assert (batch.thread_id, batch.ids, batch.message_ids, batch.attempts) == (
        thread_id,
        (q1, q2),
        (m1, m2),
        1,
    )
    assert (batch.more, batch.kept_run) == (False, None)
    assert await lease(store, thread_id) is None  # leased items are not leased twice


async def test_another_kind_runs_alone_with_its_payload(store: Backend, thread_id: int) -> None:
    await message(store, thread_id, "before")
    task = await store.write(
        store.queue.enqueue_task, thread_id, "schedule", {"prompt": "r\u00e9sum\u00e9"}, now=1.0
    )
    await message(store, thread_id, "after")
    first = await lease(store, thread_id)
    assert isinstance(first, Batch) and first.more and first.items[0].kind == "message"
    await store.write(store.queue.complete_items, first.ids, None, 11.0)
    second = await lease(store, thread_id)
    assert isinstance(second, Batch) and second.ids == (task,) and second.more
    assert (second.items[0].kind, second.items[0].payload, second.message_ids) == (
        "schedule",
        {"prompt": "r\u00e9sum\u00e9"},
        (),
    )


async def test_a_thread_with_only_future_work_says_when_it_is_due(store: Backend, thread_id: int) -> None:
    await message(store, thread_id, due=50.0)
    assert await lease(store, thread_id, now=10.0) == 50.0
    assert isinstance(await lease(store, thread_id, now=50.0), Batch)


async def test_deferred_messages_join_a_message_due_now(store: Backend, thread_id: int) -> None:
    await message(store, thread_id, "deferred", due=90.0)
    await message(store, thread_id, "also deferred", due=95.0)
    await store.write(store.queue.take_deferred_along, thread_id, 10.0)
    await message(store, thread_id, "now", due=10.0)
    batch = await lease(store, thread_id)
    assert isinstance(batch, Batch) and len(batch.items) == 3


async def test_a_retry_waiting_out_its_backoff_is_not_taken_along(store: Backend, thread_id: int) -> None:
    _, item = await message(store, thread_id)
    batch = await lease(store, thread_id)
    assert isinstance(batch, Batch)
    await store.write(store.queue.release_items, batch.ids, available_at=80.0, error="model 503", now=11.0)
    await store.write(store.queue.take_deferred_along, thread_id, 12.0)
    assert await lease(store, thread_id, now=12.0) == 80.0
    retried = await lease(store, thread_id, now=80.0)
    assert isinstance(retried, Batch) and retried.ids == (item,) and retried.attempts == 2


async def test_completed_items_are_gone_and_a_released_one_comes_back(store: Backend, thread_id: int) -> None:
    await message(store, thread_id)
    batch = await lease(store, thread_id)
    assert isinstance(batch, Batch)
    await store.write(store.queue.complete_items, batch.ids, None, 11.0)
    await store.write(store.queue.release_items, batch.ids, available_at=11.0, error=None, now=11.0)
    assert await lease(store, thread_id, now=12.0) is None  # only leased items are released


async def test_a_kept_answer_takes_the_same_items_again(store: Backend, thread_id: int) -> None:
    await message(store, thread_id, "one")
    run_id = await store.write(store.runs.start_run, thread_id, "p", "m", 1.0)
    batch = await lease(store, thread_id)
    assert isinstance(batch, Batch)
    await store.write(store.queue.keep_run, batch.ids, run_id)
    await store.write(store.queue.release_items, batch.ids, available_at=10.0, error="not saved", now=10.0)
    await message(store, thread_id, "came later")
    again = await lease(store, thread_id)
    assert isinstance(again, Batch)
    assert (again.ids, again.kept_run, again.more) == (batch.ids, run_id, True)


async def test_dead_letters_list_the_failed_items_newest_first(store: Backend, thread_id: int) -> None:
    other = await new_thread(store, "other")
    for thread, at in ((thread_id, 20.0), (other, 30.0)):
        await message(store, thread)
        batch = await lease(store, thread)
        assert isinstance(batch, Batch)
        await store.write(store.queue.end_items, batch.ids, "dead", f"failed at {at}", at)
    letters = await store.read(store.queue.dead_letters, 10)
    assert [(d.thread_id, d.chat_id, d.last_error, d.attempts) for d in letters] == [
        (other, "other", "failed at 30.0", 1),
        (thread_id, "chat", "failed at 20.0", 1),
    ]
    assert await store.read(store.queue.count_by_status) == {"dead": 2}


async def test_a_restart_releases_leases_and_dead_letters_the_ones_out_of_attempts(store: Backend) -> None:
    tired, fresh, idle = (
        await new_thread(store, "a"),
        await new_thread(store, "b"),
        await new_thread(store, "c"),
    )
    await message(store, tired)
    await message(store, fresh)
    await message(store, idle, due=70.0)
    for attempt in range(2):  # the tired thread's item was leased twice, the fresh one once
        batch = await lease(store, tired, now=10.0 + attempt)
        assert isinstance(batch, Batch)
        if attempt == 0:
            await store.write(store.queue.release_items, batch.ids, available_at=10.0, error=None, now=10.0)
    assert isinstance(await lease(store, fresh), Batch)
    assert await store.read(store.queue.count_by_status) == {"leased": 2, "pending": 1}
    assert await store.write(store.queue.recover_leases, 2, 20.0) == 1
    assert await store.read(store.queue.count_by_status) == {"dead": 1, "pending": 2}
    assert await store.read(store.queue.pending_threads) == [(fresh, 10.0), (idle, 70.0)]
    (letter,) = await store.read(store.queue.dead_letters, 10)
    assert (letter.thread_id, letter.last_error) == (tired, "interrupted too many times")


async def test_the_first_open_message_is_the_oldest_not_yet_answered(store: Backend, thread_id: int) -> None:
    assert await store.read(store.queue.first_open_message, thread_id) is None
    (m1, _), _ = await message(store, thread_id), await message(store, thread_id)
    assert await store.read(store.queue.first_open_message, thread_id) == m1
    batch = await lease(store, thread_id)
    assert isinstance(batch, Batch)
    assert await store.read(store.queue.first_open_message, thread_id) == m1  # leased is still open
    await store.write(store.queue.complete_items, batch.ids, None, 11.0)
    assert await store.read(store.queue.first_open_message, thread_id) is None


async def test_a_waiting_message_is_one_that_came_while_the_turn_runs(store: Backend, thread_id: int) -> None:
    other = await new_thread(store, "other")
    assert await store.read(store.queue.waiting_message, thread_id) is False
    await message(store, thread_id, "first")
    assert await store.read(store.queue.waiting_message, thread_id) is True
    assert isinstance(await lease(store, thread_id), Batch)
    assert await store.read(store.queue.waiting_message, thread_id) is False  # its own turn's is leased
    await store.write(store.queue.enqueue_task, thread_id, "schedule", {"prompt": "p"}, now=1.0)
    await message(store, other, "elsewhere")
    assert await store.read(store.queue.waiting_message, thread_id) is False  # not a message, not here
    await message(store, thread_id, "second")
    assert await store.read(store.queue.waiting_message, thread_id) is True
