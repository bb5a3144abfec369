"""versioned state: a document's version starts at 1 and grows by one per write; a
compare-and-swap writes only at the expected version, and of concurrent writers at one version
exactly one wins; expired documents read as absent and are purged; each owner's caps hold;
one owner never sees another's documents."""

from __future__ import annotations

import asyncio

import pytest

from gateway.store.state import TEAM, StateLimits, StateQuotaError, Usage, persona_owner
from tests.unit.store.contract.conftest import Backend

ANN = persona_owner("ann")
WIDE = StateLimits(max_documents=1000, max_bytes=1 << 20)


async def _put(store: Backend, key: str, value: str, now: float = 1.0, **kw: object) -> int:
    kw.setdefault("limits", WIDE)
    kw.setdefault("written_by", "ann")
    return await store.write(store.state.put_document, ANN, "ns", key, value, now=now, **kw)


async def test_a_document_is_created_at_version_1_and_each_write_adds_one(store: Backend) -> None:
    assert await store.read(store.state.get_document, ANN, "ns", "k", 1.0) is None
    assert await _put(store, "k", '{"a":1}') == 1
    assert await _put(store, "k", '{"a":2}', now=2.0, written_by="bob") == 2
    document = await store.read(store.state.get_document, ANN, "ns", "k", 3.0)
    assert document is not None
    assert (document.value, document.version, document.written_by, document.updated_at) == (
        '{"a":2}',
        2,
        "bob",
        2.0,
    )
    assert document.expires_at is None


async def test_cas_writes_only_at_the_expected_version_and_reports_the_current_one(store: Backend) -> None:
    cas = store.state.cas_document
    missing = await store.write(cas, ANN, "ns", "k", 3, "1", written_by="ann", now=1.0, limits=WIDE)
    assert (missing.matched, missing.version, missing.current) == (False, 0, None)
    created = await store.write(cas, ANN, "ns", "k", 0, "1", written_by="ann", now=1.0, limits=WIDE)
    assert (created.matched, created.version) == (True, 1)
    again = await store.write(cas, ANN, "ns", "k", 0, "9", written_by="ann", now=1.0, limits=WIDE)
    assert (again.matched, again.version) == (False, 1)
    assert again.current is not None and again.current.value == "1"
    stale = await store.write(cas, ANN, "ns", "k", 5, "9", written_by="ann", now=1.0, limits=WIDE)
    assert (stale.matched, stale.version) == (False, 1)
    moved = await store.write(cas, ANN, "ns", "k", 1, "2", written_by="ann", now=2.0, limits=WIDE)
    assert (moved.matched, moved.version) == (True, 2)
    assert (await store.read(store.state.get_document, ANN, "ns", "k", 2.0)).value == "2"  # type: ignore[union-attr]


async def test_of_concurrent_writers_at_one_version_exactly_one_wins(store: Backend) -> None:
    await _put(store, "k", "0")
    outcomes = await asyncio.gather(
        *(
            store.write(
                store.state.cas_document, ANN, "ns", "k", 1, str(i), written_by="ann", now=2.0, limits=WIDE
            )
            for i in range(20)
        )
    )
    winners = [i for i, o in enumerate(outcomes) if o.matched]
    assert len(winners) == 1
    assert all(o.version == 2 for o in outcomes)
    assert (await store.read(store.state.get_document, ANN, "ns", "k", 3.0)).value == str(winners[0])  # type: ignore[union-attr]


async def test_an_expired_document_is_absent_and_a_new_write_starts_again_at_1(store: Backend) -> None:
    await _put(store, "k", '"old"', expires_at=5.0)
    await _put(store, "forever", '"x"')
    assert (await store.read(store.state.get_document, ANN, "ns", "k", 4.9)).version == 1  # type: ignore[union-attr]
    assert await store.read(store.state.get_document, ANN, "ns", "k", 5.0) is None
    listed = await store.read(store.state.query_documents, ANN, "ns", now=6.0, limit=10)
    assert [d.key for d in listed] == ["forever"]
    missing = await store.write(
        store.state.cas_document, ANN, "ns", "k", 1, '"new"', written_by="ann", now=6.0, limits=WIDE
    )
    assert (missing.matched, missing.version) == (False, 0)
    assert not await store.write(store.state.delete_document, ANN, "ns", "k", 6.0)
    await _put(store, "k2", '"t"', expires_at=7.0)
    assert await _put(store, "k2", '"again"', now=8.0) == 1
    assert (await store.read(store.state.get_document, ANN, "ns", "k2", 9.0)).expires_at is None  # type: ignore[union-attr]


async def test_writes_purge_expired_documents_and_give_back_their_usage(store: Backend) -> None:
    for i in range(5):
        await _put(store, f"t{i}", '"tmp"', expires_at=2.0)
    assert await store.read(store.state.usage, ANN) == Usage(5, 25)
    await store.write(store.state.put_document, TEAM, "ns", "x", "1", written_by="ann", now=3.0, limits=WIDE)
    assert await store.read(store.state.usage, ANN) == Usage(0, 0)
    assert await store.read(store.state.usage, TEAM) == Usage(1, 1)
    assert await store.write(store.state.purge_expired, 3.0, limit=10) == 0


async def test_caps_refuse_a_write_and_keep_what_was_there(store: Backend) -> None:
    tight = StateLimits(max_documents=2, max_bytes=12)
    await _put(store, "a", '"1234"', limits=tight, metadata='"m"')
    await _put(store, "b", "1", limits=tight)
    with pytest.raises(StateQuotaError) as too_many:
        await _put(store, "c", "1", limits=tight)
    assert (too_many.value.cap, too_many.value.limit) == ("documents", 2)
    with pytest.raises(StateQuotaError) as too_big:
        await _put(store, "b", '"12345"', limits=tight)
    assert too_big.value.cap == "bytes"
    assert (await store.read(store.state.get_document, ANN, "ns", "b", 2.0)).value == "1"  # type: ignore[union-attr]
    assert await store.read(store.state.usage, ANN) == Usage(2, 10)  # values and metadata count
    assert await _put(store, "b", '"1"', limits=tight) == 2  # a rewrite that fits
    assert await store.write(store.state.delete_document, ANN, "ns", "a", 2.0)
    assert await _put(store, "c", "1", limits=tight) == 1
    assert await store.read(store.state.usage, ANN) == Usage(2, 4)


async def test_a_full_owner_is_made_room_for_by_its_expired_documents(store: Backend) -> None:
    tight = StateLimits(max_documents=2, max_bytes=100)
    await _put(store, "a", "1", limits=tight, expires_at=2.0)
    await _put(store, "b", "1", limits=tight)
    assert await _put(store, "c", "1", now=3.0, limits=tight) == 1
    assert [d.key for d in await store.read(store.state.query_documents, ANN, "ns", now=3.0, limit=10)] == [
        "b",
        "c",
    ]


async def test_query_lists_by_key_with_a_prefix_and_pages_on_after_a_key(store: Backend) -> None:
    for key in ("task.2", "task.10", "task.1", "taskz", "other", "task-x"):
        await _put(store, key, '"v"')
    await store.write(
        store.state.put_document, ANN, "elsewhere", "task.3", "1", written_by="a", now=1.0, limits=WIDE
    )
    query = store.state.query_documents
    every = [d.key for d in await store.read(query, ANN, "ns", now=2.0, limit=10)]
    assert every == ["other", "task-x", "task.1", "task.10", "task.2", "taskz"]
    tasks = [d.key for d in await store.read(query, ANN, "ns", now=2.0, limit=10, key_prefix="task.")]
    assert tasks == ["task.1", "task.10", "task.2"]
    first = await store.read(query, ANN, "ns", now=2.0, limit=2, key_prefix="task.")
    rest = await store.read(query, ANN, "ns", now=2.0, limit=2, key_prefix="task.", after=first[-1].key)
    assert [d.key for d in first] + [d.key for d in rest] == tasks
    assert await store.read(query, ANN, "ns", now=2.0, limit=2, key_prefix="task.", after="task.2") == []


async def test_an_owner_never_sees_another_owners_documents(store: Backend) -> None:
    bob = persona_owner("bob")
    await _put(store, "k", '"ann"')
    await store.write(
        store.state.put_document, TEAM, "ns", "k", '"team"', written_by="bob", now=1.0, limits=WIDE
    )
    assert await store.read(store.state.get_document, bob, "ns", "k", 2.0) is None
    assert (await store.read(store.state.get_document, TEAM, "ns", "k", 2.0)).value == '"team"'  # type: ignore[union-attr]
    assert await store.read(store.state.query_documents, bob, "ns", now=2.0, limit=10) == []
    assert not await store.write(store.state.delete_document, bob, "ns", "k", 2.0)
    outcome = await store.write(
        store.state.cas_document, bob, "ns", "k", 0, '"bob"', written_by="bob", now=2.0, limits=WIDE
    )
    assert outcome.matched and outcome.version == 1
    assert (await store.read(store.state.get_document, ANN, "ns", "k", 2.0)).value == '"ann"'  # type: ignore[union-attr]
