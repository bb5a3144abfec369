"""session_scope: which messages of a chat share a conversation (the binding's, else the
channel's; topic by default), and how a sender's own conversation is kept apart in the store
while its replies keep the platform's place."""

from __future__ import annotations

from pathlib import Path

from connectors.base import InboundEvent, Sender, ThreadKey
from gateway.config import Binding
from gateway.pipeline import Bindings
from gateway.store.db import open_database
from gateway.store.threads import get_thread, key_of, topic_value, upsert_thread


def _event(chat: str = "g1", topic: str | None = "t9", chat_type: str = "group") -> InboundEvent:
    return InboundEvent(
        channel="tg",
        event_id="1",
        thread_key=ThreadKey("tg", chat, topic),
        chat_type=chat_type,  # type: ignore[arg-type]
        sender=Sender("ann", "Ann"),
        text="hi",
    )


def _bindings(channel_scope: str | None, chat_scope: str | None = None) -> Bindings:
    bindings = [
        Binding(channel="tg", persona="p"),
        Binding(channel="tg", chat="g2", persona="p", session_scope=chat_scope),
    ]
    return Bindings(bindings, ["p"], {"tg": channel_scope})  # type: ignore[dict-item]


def test_topic_is_the_default_and_keeps_the_platforms_place() -> None:
    assert _bindings(None).conversation(_event()) == (ThreadKey("tg", "g1", "t9"), None)
    assert _bindings("topic").conversation(_event()) == (ThreadKey("tg", "g1", "t9"), None)


def test_chat_scope_joins_the_topics_and_user_scope_splits_the_senders() -> None:
    assert _bindings("chat").conversation(_event()) == (ThreadKey("tg", "g1"), None)
    assert _bindings("user").conversation(_event()) == (ThreadKey("tg", "g1", "t9"), "ann")


def test_a_chats_binding_overrides_the_channel_and_a_dm_is_always_one_conversation() -> None:
    bindings = _bindings("user", chat_scope="topic")
    assert bindings.conversation(_event(chat="g2")) == (ThreadKey("tg", "g2", "t9"), None)
    assert bindings.conversation(_event(chat="g1")) == (ThreadKey("tg", "g1", "t9"), "ann")
    assert bindings.conversation(_event(chat="d1", topic=None, chat_type="dm")) == (
        ThreadKey("tg", "d1"),
        None,
    )


def test_the_session_is_stored_apart_from_the_platform_topic() -> None:
    key = ThreadKey("slack", "C1", "1700.01")
    assert topic_value(key, "U1") == "1700.01#user=U1"
    assert key_of("slack", "C1", "1700.01#user=U1") == key
    assert key_of("tg", "g", "#user=7") == ThreadKey("tg", "g")


async def test_each_sender_session_is_its_own_thread_replying_to_the_same_place(tmp_path: Path) -> None:
    db = await open_database(tmp_path / "talon.db")
    try:
        key = ThreadKey("tg", "g", "5")

        def threads(conn):  # type: ignore[no-untyped-def]
            shared = upsert_thread(conn, key, chat_type="group", persona="p", now=1.0)
            ann = upsert_thread(conn, key, chat_type="group", persona="p", now=1.0, session="ann")
            again = upsert_thread(conn, key, chat_type="group", persona="p", now=2.0, session="ann")
            bob = upsert_thread(conn, key, chat_type="group", persona="p", now=1.0, session="bob")
            return shared, ann, again, bob, get_thread(conn, ann.id)

        shared, ann, again, bob, read = await db.run_transaction(threads)
    finally:
        await db.close()
    assert len({shared.id, ann.id, bob.id}) == 3 and again.id == ann.id
    assert {t.key for t in (shared, ann, bob, read)} == {key}
    assert (shared.session, ann.session, bob.session) == (None, "ann", "bob")
