"""threads: one row per ThreadKey, found or created by the one upsert."""

from __future__ import annotations

from connectors.base import ThreadKey
from tests.unit.store.contract.conftest import Backend

KEY = ThreadKey("team-slack", "C1", "1700000000.000100")


async def test_a_new_key_creates_a_thread_with_what_the_caller_gave(store: Backend) -> None:
    row = await store.write(
        store.threads.upsert_thread, KEY, chat_type="thread", persona="alice", now=10.0, title="launch"
    )
    assert (row.channel, row.chat_id, row.topic, row.chat_type) == ("team-slack", "C1", KEY.topic, "thread")
    assert (row.persona, row.title, row.created_at, row.updated_at) == ("alice", "launch", 10.0, 10.0)
    assert (row.context_from, row.summarized_upto) == (0, 0)
    assert row.key == KEY
    assert await store.read(store.threads.get_thread, row.id) == row


async def test_the_same_key_finds_the_thread_and_touches_it_keeping_what_it_was_created_with(
    store: Backend,
) -> None:
    first = await store.write(store.threads.upsert_thread, KEY, chat_type="thread", persona="alice", now=10.0)
    again = await store.write(
        store.threads.upsert_thread, KEY, chat_type="group", persona="bob", now=20.0, title="other"
    )
    assert again.id == first.id
    assert (again.chat_type, again.persona, again.title) == ("thread", "alice", None)
    assert (again.created_at, again.updated_at) == (10.0, 20.0)


async def test_rebind_takes_a_new_persona_but_no_persona_never_unbinds(store: Backend) -> None:
    row = await store.write(store.threads.upsert_thread, KEY, chat_type="dm", persona=None, now=1.0)
    assert row.persona is None
    bound = await store.write(
        store.threads.upsert_thread, KEY, chat_type="dm", persona="alice", now=2.0, rebind=True
    )
    assert bound.persona == "alice"
    kept = await store.write(
        store.threads.upsert_thread, KEY, chat_type="dm", persona=None, now=3.0, rebind=True
    )
    assert kept.persona == "alice"
    moved = await store.write(
        store.threads.upsert_thread, KEY, chat_type="dm", persona="bob", now=4.0, rebind=True
    )
    assert moved.persona == "bob"


async def test_rebind_takes_the_chat_type_of_the_platform(store: Backend) -> None:
    # A post into a chat nobody has written from yet creates its thread with a guess.
    posted = await store.write(store.threads.upsert_thread, KEY, chat_type="group", persona="alice", now=1.0)
    heard = await store.write(
        store.threads.upsert_thread, KEY, chat_type="dm", persona="alice", now=2.0, rebind=True
    )
    assert (heard.id, heard.chat_type) == (posted.id, "dm")


async def test_an_unbound_thread_stays_unbound_without_rebind(store: Backend) -> None:
    await store.write(store.threads.upsert_thread, KEY, chat_type="dm", persona=None, now=1.0)
    row = await store.write(store.threads.upsert_thread, KEY, chat_type="dm", persona="alice", now=2.0)
    assert row.persona is None


async def test_each_topic_of_a_chat_is_its_own_thread_and_no_topic_is_the_chat_itself(store: Backend) -> None:
    def upsert(key: ThreadKey):  # type: ignore[no-untyped-def]
        return store.write(store.threads.upsert_thread, key, chat_type="group", persona="p", now=1.0)

    chat = await upsert(ThreadKey("tg", "-100", None))
    empty = await upsert(ThreadKey("tg", "-100", ""))
    first = await upsert(ThreadKey("tg", "-100", "77"))
    second = await upsert(ThreadKey("tg", "-100", "78"))
    other_channel = await upsert(ThreadKey("tg2", "-100", None))
    assert chat.id == empty.id
    assert len({chat.id, first.id, second.id, other_channel.id}) == 4
    assert chat.key == ThreadKey("tg", "-100", None)
    assert first.key == ThreadKey("tg", "-100", "77")


async def test_an_unknown_thread_id_reads_as_none(store: Backend) -> None:
    assert await store.read(store.threads.get_thread, 12345) is None


async def test_context_marks_move_where_the_caller_says(store: Backend) -> None:
    row = await store.write(store.threads.upsert_thread, KEY, chat_type="dm", persona="p", now=1.0)
    await store.write(store.threads.set_context_from, row.id, 40)
    await store.write(store.threads.set_summarized_upto, row.id, 55)
    after = await store.read(store.threads.get_thread, row.id)
    assert after is not None
    assert (after.context_from, after.summarized_upto) == (40, 55)


async def test_recent_threads_lists_the_most_recently_active_first(store: Backend) -> None:
    for n, at in ((1, 5.0), (2, 9.0), (3, 7.0)):
        await store.write(
            store.threads.upsert_thread, ThreadKey("c", f"chat{n}"), chat_type="dm", persona=None, now=at
        )
    listed = await store.read(store.threads.recent_threads, 2)
    assert [(t.chat_id, t.updated_at, t.messages) for t in listed] == [("chat2", 9.0, 0), ("chat3", 7.0, 0)]
