"""Pending interactions: one answer each (later ones refused), expiry only while pending, a tool
call finds the interaction it recorded before, thread-kept approvals, and run checkpoints that
point the batch at their run."""

from __future__ import annotations

from connectors.base import ThreadKey
from gateway.store import interactions as rows
from tests.unit.store.contract.conftest import Backend


async def _thread(backend: Backend) -> int:
    row = await backend.write(
        backend.threads.upsert_thread, ThreadKey("c", "1"), chat_type="dm", persona="p", now=1.0
    )
    return row.id


def _new(thread_id: int, iid: str = "abc12345", call: str | None = "call-1") -> rows.NewInteraction:
    return rows.NewInteraction(iid, thread_id, 7, call, "question", {"question": "Q?"}, ("u1",), 100.0)


async def test_one_answer_wins_and_later_ones_are_refused(store: Backend) -> None:
    backend = store
    thread_id = await _thread(backend)
    row, created = await backend.write(rows.create_interaction, _new(thread_id), 1.0)
    assert created and row.state == "pending" and row.answerers == ("u1",)
    assert await backend.write(rows.answer_interaction, row.id, {"v": 1}, "u1", 2.0)
    assert not await backend.write(rows.answer_interaction, row.id, {"v": 2}, "u1", 3.0)
    assert not await backend.write(rows.expire_interaction, row.id, 4.0)
    got = await backend.read(rows.get_interaction, row.id)
    assert got is not None and (got.state, got.answer, got.answered_by) == ("answered", {"v": 1}, "u1")
    assert await backend.read(rows.pending_interactions) == []


async def test_the_same_tool_call_finds_its_interaction_again(store: Backend) -> None:
    thread_id = await _thread(store)
    first, _ = await store.write(rows.create_interaction, _new(thread_id), 1.0)
    again, created = await store.write(rows.create_interaction, _new(thread_id, "other123"), 2.0)
    assert not created and again.id == first.id
    await store.write(rows.set_platform_message, first.id, "55")
    assert [r.platform_message_id for r in await store.read(rows.pending_interactions)] == ["55"]
    assert await store.write(rows.expire_interaction, first.id, 3.0)
    assert not await store.write(rows.answer_interaction, first.id, {}, "u1", 4.0)


async def test_approval_rules_match_exactly_per_thread(store: Backend) -> None:
    thread_id = await _thread(store)
    await store.write(rows.add_approval_rule, thread_id, "bash", "k1", "u1", 1.0)
    await store.write(rows.add_approval_rule, thread_id, "bash", "k1", "u1", 2.0)  # kept once
    assert await store.read(rows.has_approval_rule, thread_id, "bash", "k1")
    assert not await store.read(rows.has_approval_rule, thread_id, "bash", "k2")
    assert not await store.read(rows.has_approval_rule, thread_id + 1, "bash", "k1")


async def test_a_checkpoint_resumes_its_run_until_the_thread_drops_it(store: Backend) -> None:
    thread_id = await _thread(store)
    run_id = await store.write(store.runs.start_run, thread_id, "p", "m:m", 1.0)
    await store.write(rows.save_checkpoint, run_id, thread_id, {"history": []}, [], 2.0)
    await store.write(rows.save_checkpoint, run_id, thread_id, {"history": [1]}, [], 3.0)
    assert await store.write(rows.load_checkpoint, run_id) == {"history": [1]}
    await store.write(rows.drop_checkpoints, thread_id)
    assert await store.write(rows.load_checkpoint, run_id) is None


async def test_a_prompt_is_claimed_once_and_a_crash_leaves_it_unknown(store: Backend) -> None:
    thread_id = await _thread(store)
    row, _ = await store.write(rows.create_interaction, _new(thread_id), 1.0)
    assert row.post_state is None
    assert await store.write(rows.claim_post, row.id)
    assert not await store.write(rows.claim_post, row.id)  # the resumed run does not post it again
    assert await store.write(rows.settle_interrupted_posts) == [row.id]
    assert await store.write(rows.settle_interrupted_posts) == []
    got = await store.read(rows.get_interaction, row.id)
    assert got is not None and (got.post_state, got.platform_message_id) == ("unknown", None)
    assert not await store.write(rows.claim_post, row.id)
    other, _ = await store.write(rows.create_interaction, _new(thread_id, "other123", "call-2"), 2.0)
    assert await store.write(rows.claim_post, other.id)
    await store.write(rows.set_platform_message, other.id, "77")
    assert await store.write(rows.settle_interrupted_posts) == []
    got = await store.read(rows.get_interaction, other.id)
    assert got is not None and (got.post_state, got.platform_message_id) == ("sent", "77")
