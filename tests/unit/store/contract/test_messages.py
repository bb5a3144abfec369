"""messages and inbox dedupe: each platform event is taken in once; transcripts read back in
conversation order."""

from __future__ import annotations

import pytest

from connectors.base import ThreadKey
from tests.unit.store.contract.conftest import Backend


@pytest.fixture
async def thread_id(store: Backend) -> int:
    row = await store.write(
        store.threads.upsert_thread, ThreadKey("c", "chat"), chat_type="dm", persona="p", now=1.0
    )
    return row.id


async def test_an_event_is_recorded_once_per_channel(store: Backend) -> None:
    assert await store.write(store.messages.record_event, "tg", "update-1", "accepted", 1.0)
    assert not await store.write(store.messages.record_event, "tg", "update-1", "accepted", 2.0)
    assert not await store.write(store.messages.record_event, "tg", "update-1", "stored", 3.0)
    assert await store.write(store.messages.record_event, "slack", "update-1", "accepted", 4.0)


async def test_a_redelivered_event_in_a_failed_transaction_is_not_remembered(store: Backend) -> None:
    def take_in_then_fail(conn):  # type: ignore[no-untyped-def]
        store.messages.record_event(conn, "tg", "update-9", "accepted", 1.0)
        raise RuntimeError("the rest of the intake failed")

    with pytest.raises(RuntimeError):
        await store.write(take_in_then_fail)
    assert await store.write(store.messages.record_event, "tg", "update-9", "accepted", 2.0)


async def test_a_message_keeps_what_was_stored(store: Backend, thread_id: int) -> None:
    message_id = await store.write(
        store.messages.add_message,
        thread_id,
        "user",
        "hello",
        created_at=5.0,
        sender_id="u1",
        sender_name="Ana",
        platform_message_id="m-1",
        attachments='[{"name": "a.txt", "path": "/f/a.txt"}]',
        event_id="e-1",
    )
    (row,) = await store.read(store.messages.messages_after, thread_id, after=0, limit=10)
    assert (row.id, row.role, row.sender_name, row.text) == (message_id, "user", "Ana", "hello")
    assert row.attachments == '[{"name": "a.txt", "path": "/f/a.txt"}]'
    assert row.sort_key is None
    assert await store.read(store.messages.platform_message_id, message_id) == "m-1"


async def test_newest_messages_come_newest_first_in_conversation_order(
    store: Backend, thread_id: int
) -> None:
    async def say(role: str, text: str, sort_key: float | None = None) -> int:
        return await store.write(
            store.messages.add_message, thread_id, role, text, created_at=1.0, sort_key=sort_key
        )

    first = await say("user", "first")
    second = await say("user", "second")  # arrived while the reply to "first" was being written
    await say("assistant", "reply to first", sort_key=first + 0.5)
    await say("user", "third")
    newest = await store.read(store.messages.newest_messages, thread_id, after=0, limit=10)
    assert [m.text for m in newest] == ["third", "second", "reply to first", "first"]
    limited = await store.read(store.messages.newest_messages, thread_id, after=0, limit=2)
    assert [m.text for m in limited] == ["third", "second"]
    after_first = await store.read(store.messages.newest_messages, thread_id, after=first, limit=10)
    assert [m.text for m in after_first] == ["third", "second", "reply to first"]
    upto = await store.read(
        store.messages.newest_messages, thread_id, after=0, limit=10, upto_message_id=second
    )
    assert [m.text for m in upto] == ["second", "reply to first", "first"]
    by_id = await store.read(store.messages.messages_after, thread_id, after=first, limit=2)
    assert [m.text for m in by_id] == ["second", "reply to first"]


async def test_threads_only_see_their_own_messages(store: Backend, thread_id: int) -> None:
    other = await store.write(
        store.threads.upsert_thread, ThreadKey("c", "other"), chat_type="dm", persona="p", now=2.0
    )
    await store.write(store.messages.add_message, thread_id, "user", "mine", created_at=1.0)
    await store.write(store.messages.add_message, other.id, "user", "theirs", created_at=1.0)
    assert [m.text for m in await store.read(store.messages.messages_after, thread_id, after=0, limit=9)] == [
        "mine"
    ]
    listed = await store.read(store.threads.recent_threads, 10)
    assert [(t.chat_id, t.messages) for t in listed] == [("other", 1), ("chat", 1)]


async def test_batch_senders_are_the_distinct_users_of_the_messages(store: Backend, thread_id: int) -> None:
    async def say(role: str, sender: str | None) -> int:
        return await store.write(
            store.messages.add_message, thread_id, role, "x", created_at=1.0, sender_id=sender
        )

    ids = [await say("user", "bob"), await say("user", "ann"), await say("user", "bob")]
    reply = await say("assistant", None)
    assert (await store.read(store.messages.batch_senders, [*ids, reply])).every == (
        "bob",
        "ann",
    )  # first to write first
    assert (await store.read(store.messages.batch_senders, [reply])).every == ()
    assert (await store.read(store.messages.batch_senders, [])).every == ()
