"""Scoped memory: facts and hot blocks belong to one scope key and are reached only through
it; search ranks the matches of a parsed query among the facts and memory_access items of the
keys it is given, and keeps in step with every write, supersede, removal and rewrite."""

from __future__ import annotations

from connectors.base import ThreadKey
from gateway.memory_query import parse_query
from gateway.store.facts import ScopeKey, user_owner
from tests.unit.store.contract.conftest import Backend


async def _thread(store: Backend, chat: str) -> int:
    row = await store.write(
        store.threads.upsert_thread, ThreadKey("c", chat), chat_type="group", persona="p", now=1.0
    )
    return row.id


def _keys(thread_id: int, sender: str, persona: str = "p") -> list[ScopeKey]:
    return [
        ScopeKey("thread", persona, str(thread_id)),
        ScopeKey("user", persona, user_owner("c", sender)),
        ScopeKey("persona", persona, ""),
    ]


async def _add(
    store: Backend, key: ScopeKey, content: str, category: str = "learning", now: float = 1.0
) -> int:
    return await store.write(
        store.facts.add_fact, key, category=category, content=content, evidence="e", now=now
    )


async def _found(store: Backend, query: str, keys: list[ScopeKey], **kw: object) -> list[tuple[str, str]]:
    hits = await store.read(store.facts.search, parse_query(query), keys, **kw)
    return [(h.scope, h.content) for h in hits]


async def test_search_reaches_only_the_keys_it_is_given(store: Backend) -> None:
    one, two = await _thread(store, "one"), await _thread(store, "two")
    thread, ann, persona = _keys(one, "ann")
    await _add(store, thread, "the kettle is broken")
    await _add(store, ann, "Ann's kettle is green")
    await _add(store, persona, "kettle rules for everyone")
    await store.write(store.memory.put_item, one, "p", "note1", "note", "buy a kettle", 1.0)
    await _add(store, ScopeKey("persona", "other", ""), "another persona's kettle")
    assert sorted(await _found(store, "kettle", [thread, ann, persona])) == [
        ("persona", "kettle rules for everyone"),
        ("thread", "buy a kettle"),
        ("thread", "the kettle is broken"),
        ("user", "Ann's kettle is green"),
    ]
    bob = _keys(two, "bob")
    assert await _found(store, "kettle", bob) == [("persona", "kettle rules for everyone")]
    assert await _found(store, "kettle", []) == []


async def test_search_ranks_filters_and_limits(store: Backend) -> None:
    tid = await _thread(store, "t")
    key = _keys(tid, "ann")[0]
    await _add(store, key, "deploy notes about many other unrelated things entirely", now=1.0)
    await _add(store, key, "deploy deploy", category="decision", now=5.0)
    found = await _found(store, "deploy", [key])
    assert found[0] == ("thread", "deploy deploy")  # the denser match ranks first
    assert await _found(store, "deploy", [key], category="decision") == [("thread", "deploy deploy")]
    assert await _found(store, "deploy", [key], since=2.0) == [("thread", "deploy deploy")]
    assert len(await _found(store, "deploy", [key], limit=1)) == 1
    assert await _found(store, '"notes about" NOT decision', [key]) == [
        ("thread", "deploy notes about many other unrelated things entirely")
    ]
    assert await _found(store, "unrel*", [key]) == [
        ("thread", "deploy notes about many other unrelated things entirely")
    ]


async def test_the_index_follows_supersede_remove_and_rewrites(store: Backend) -> None:
    tid = await _thread(store, "t")
    thread, ann, _ = _keys(tid, "ann")
    old = await _add(store, ann, "lunch at noon")
    new = await store.write(
        store.facts.supersede_fact,
        old,
        ann,
        category="learning",
        content="lunch at one",
        evidence=None,
        now=2.0,
    )
    assert await _found(store, "lunch", [ann]) == [("user", "lunch at one")]
    kept = await store.read(store.facts.get_fact, old, [ann])
    assert kept is not None and kept.status == "superseded"
    assert (await store.read(store.facts.get_fact, new, [ann])).supersedes == old
    assert await store.read(store.facts.get_fact, new, [thread]) is None  # not this key's
    assert not await store.write(store.facts.remove_fact, new, [thread])
    assert await store.write(store.facts.remove_fact, new, [ann])
    assert await _found(store, "lunch", [ann]) == []
    assert await store.read(store.facts.count_facts, ann) == 0

    await store.write(store.memory.put_item, tid, "p", "k", "note", "pasta tonight", 1.0)
    await store.write(store.memory.put_item, tid, "p", "k", "note", "risotto tonight", 2.0)
    assert await _found(store, "pasta OR risotto", [thread]) == [("thread", "risotto tonight")]
    await store.write(store.memory.delete_item, tid, "k")
    assert await _found(store, "risotto", [thread]) == []


async def test_hot_blocks_are_set_replaced_and_cleared_per_key(store: Backend) -> None:
    tid = await _thread(store, "t")
    thread, ann, persona = _keys(tid, "ann")
    bob = _keys(tid, "bob")[1]
    await store.write(store.facts.set_hot, ann, "Ann: metric units", 1.0)
    await store.write(store.facts.set_hot, persona, "Standup 9:30", 1.0)
    await store.write(store.facts.set_hot, ann, "Ann: imperial units", 2.0)
    blocks = await store.read(store.facts.hot_blocks, [persona, ann, thread])
    assert [(b.scope, b.content) for b in blocks] == [
        ("persona", "Standup 9:30"),
        ("user", "Ann: imperial units"),
    ]
    assert await store.read(store.facts.hot_blocks, [bob]) == []
    await store.write(store.facts.set_hot, ann, "", 3.0)
    assert await store.read(store.facts.get_hot, ann) is None


async def test_a_batch_has_a_sole_sender_only_when_all_its_user_messages_share_one(store: Backend) -> None:
    tid = await _thread(store, "t")

    async def say(sender: str | None, role: str = "user") -> int:
        return await store.write(
            store.messages.add_message, tid, role, "hi", created_at=1.0, sender_id=sender
        )

    ann1, ann2, bob, nobody = await say("ann"), await say("ann"), await say("bob"), await say(None)
    reply = await say(None, "assistant")
    assert (await store.read(store.messages.batch_senders, [ann1, ann2, reply])).sole == "ann"
    several = await store.read(store.messages.batch_senders, [ann1, bob])
    assert several.sole is None and several.counted == "ann"  # counted for the first of several
    assert (await store.read(store.messages.batch_senders, [nobody])).sole is None
    assert (await store.read(store.messages.batch_senders, [])).sole is None
