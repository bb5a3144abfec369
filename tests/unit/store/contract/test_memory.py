"""memory items: one item per thread and key, rewritten in place, listed newest first, and never
reached from another thread."""

from __future__ import annotations

import pytest

from connectors.base import ThreadKey
from gateway.store.memory import MemoryRow
from tests.unit.store.contract.conftest import Backend


async def _thread(store: Backend, chat: str) -> int:
    row = await store.write(
        store.threads.upsert_thread, ThreadKey("c", chat), chat_type="dm", persona="p", now=1.0
    )
    return row.id


@pytest.fixture
async def thread_id(store: Backend) -> int:
    return await _thread(store, "chat")


async def test_an_item_is_stored_and_rewritten_under_its_key(store: Backend, thread_id: int) -> None:
    assert await store.read(store.memory.get_item, thread_id, "city") is None
    assert await store.read(store.memory.item_kind, thread_id, "city") is None
    await store.write(store.memory.put_item, thread_id, "p", "city", "fact", "Lisbon", 1.0)
    assert await store.read(store.memory.get_item, thread_id, "city") == MemoryRow(
        "city", "fact", "Lisbon", 1.0
    )
    await store.write(store.memory.put_item, thread_id, "q", "city", "note", "Porto", 2.0)
    assert await store.read(store.memory.get_item, thread_id, "city") == MemoryRow(
        "city", "note", "Porto", 2.0
    )
    assert await store.read(store.memory.item_kind, thread_id, "city") == "note"
    assert await store.read(store.memory.count_items, thread_id) == 1


async def test_items_are_listed_most_recently_updated_first(store: Backend, thread_id: int) -> None:
    for key, kind, now in (
        ("a", "fact", 1.0),
        ("b", "note", 3.0),
        ("summary", "summary", 2.0),
        ("c", "fact", 3.0),
    ):
        await store.write(store.memory.put_item, thread_id, "p", key, kind, key.upper(), now)
    listed = await store.read(store.memory.list_items, thread_id, limit=10)
    assert [i.key for i in listed] == ["c", "b", "summary", "a"]  # a tie goes to the later item
    assert [i.key for i in await store.read(store.memory.list_items, thread_id, limit=2)] == ["c", "b"]
    facts = await store.read(store.memory.list_items, thread_id, limit=10, kind="fact")
    assert [i.key for i in facts] == ["c", "a"]
    without = await store.read(store.memory.list_items, thread_id, limit=10, summaries=False)
    assert [i.key for i in without] == ["c", "b", "a"]
    assert await store.read(store.memory.keys_of_kind, thread_id, "summary") == {"summary"}
    assert await store.read(store.memory.keys_of_kind, thread_id, "fact") == {"a", "c"}


async def test_delete_reports_whether_there_was_an_item_and_can_spare_the_summary(
    store: Backend, thread_id: int
) -> None:
    await store.write(store.memory.put_item, thread_id, "p", "k", "note", "v", 1.0)
    await store.write(store.memory.put_item, thread_id, "p", "summary", "summary", "s", 1.0)
    assert await store.write(store.memory.delete_item, thread_id, "k")
    assert not await store.write(store.memory.delete_item, thread_id, "k")
    assert not await store.write(store.memory.delete_item, thread_id, "summary", summaries=False)
    assert await store.read(store.memory.get_item, thread_id, "summary") is not None
    assert await store.write(store.memory.delete_item, thread_id, "summary")
    assert await store.read(store.memory.count_items, thread_id) == 0


async def test_a_thread_never_sees_another_threads_items(store: Backend, thread_id: int) -> None:
    other = await _thread(store, "other")
    await store.write(store.memory.put_item, thread_id, "p", "k", "fact", "mine", 1.0)
    await store.write(store.memory.put_item, other, "p", "k", "fact", "theirs", 2.0)
    assert (await store.read(store.memory.get_item, thread_id, "k")).value == "mine"  # type: ignore[union-attr]
    assert [i.value for i in await store.read(store.memory.list_items, other, limit=10)] == ["theirs"]
    assert await store.write(store.memory.delete_item, other, "k")
    assert await store.read(store.memory.count_items, thread_id) == 1
    assert await store.read(store.memory.keys_of_kind, other, "fact") == set()
