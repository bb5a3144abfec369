"""children: a background child's job row with its narrowed labels, steering taken once at a
boundary, a progress ring of the last 20 events, the batch anchor of a retried turn, and the
finished nodes of a compose call by its key."""

from __future__ import annotations

from connectors.base import ThreadKey
from gateway.store.children import ChildJob
from gateway.store.delegation import NewBackgroundTask
from tests.unit.store.contract.conftest import Backend


async def _job(store: Backend) -> str:
    origin = await store.write(
        store.threads.upsert_thread, ThreadKey("console", "main"), chat_type="dm", persona="alice", now=1.0
    )
    task = NewBackgroundTask("j1", "alice", "alice", origin.id, "dig", "dig", "local", "/w", 900.0)

    def open_with_job(conn):  # type: ignore[no-untyped-def]
        thread_id = store.delegation.open_task(conn, task, limit=5, now=2.0)
        store.children.insert_child_job(
            conn, ChildJob("j1", 7, 7, 1, ("git.read", "fs.read:thread"), "local:m", None, 3, True, "scan")
        )
        return thread_id

    await store.write(open_with_job)
    return "j1"


async def test_a_job_keeps_its_labels_and_options(store: Backend) -> None:
    job_id = await _job(store)
    job = await store.read(store.children.child_job, job_id)
    assert job is not None
    assert (job.labels, job.model, job.max_tool_rounds, job.progress_events, job.depth) == (
        ("git.read", "fs.read:thread"),
        "local:m",
        3,
        True,
        1,
    )
    await store.write(store.children.set_cancel_reason, job_id, "obsolete")
    await store.write(store.children.touch_job, job_id, 5.0, "line one\nline two")
    await store.write(store.children.touch_job, job_id, 6.0, None)
    job = await store.read(store.children.child_job, job_id)
    assert job is not None
    assert (job.cancel_reason, job.last_activity_at, job.last_output) == (
        "obsolete",
        6.0,
        "line one\nline two",
    )
    assert await store.read(store.children.child_job, "other") is None


async def test_steering_is_pending_until_taken_once(store: Backend) -> None:
    job_id = await _job(store)
    assert await store.write(store.children.add_steering, job_id, "first", 3.0) == 1
    assert await store.write(store.children.add_steering, job_id, "second", 3.1) == 2
    assert await store.write(store.children.take_steering, job_id, 4.0) == ["first", "second"]
    assert await store.write(store.children.take_steering, job_id, 4.1) == []
    assert await store.read(store.children.pending_steering, job_id) == 0


async def test_progress_keeps_the_last_twenty_events_in_order(store: Backend) -> None:
    job_id = await _job(store)
    for i in range(25):
        await store.write(store.children.add_progress, job_id, f"step {i}", "scan", {"i": i}, 10.0 + i)
    events = await store.read(store.children.recent_progress, job_id)
    assert [e.message for e in events] == [f"step {i}" for i in range(5, 25)]
    assert events[-1].metadata == {"i": 24} and events[-1].phase == "scan"
    job = await store.read(store.children.child_job, job_id)
    assert job is not None and job.last_activity_at == 34.0


async def test_the_batch_anchor_is_the_first_leased_item_and_stays_across_a_release(store: Backend) -> None:
    thread = await store.write(
        store.threads.upsert_thread, ThreadKey("console", "t"), chat_type="dm", persona="alice", now=1.0
    )
    assert await store.read(store.children.batch_anchor, thread.id) is None
    for text in ("one", "two"):
        message_id = await store.write(store.messages.add_message, thread.id, "user", text, created_at=1.0)
        await store.write(store.queue.enqueue_message, thread.id, message_id, available_at=1.0, now=1.0)
    batch = await store.write(store.queue.lease_batch, thread.id, 60.0, 2.0)
    anchor = await store.read(store.children.batch_anchor, thread.id)
    assert anchor == min(item.id for item in batch.items)
    await store.write(store.queue.recover_leases, 5, 3.0)
    await store.write(store.queue.lease_batch, thread.id, 60.0, 4.0)
    assert await store.read(store.children.batch_anchor, thread.id) == anchor


async def test_finished_nodes_are_found_by_their_call_key(store: Backend) -> None:
    usage = {"input_tokens": 3, "output_tokens": 2, "model_calls": 1}
    await store.write(store.children.record_node, "k1", "a", "a done", usage, 1.0)
    await store.write(store.children.record_node, "k2", "a", "other call", usage, 1.0)
    found = await store.read(store.children.finished_nodes, "k1")
    assert list(found) == ["a"]
    assert (found["a"].status, found["a"].output, found["a"].usage) == ("completed", "a done", usage)
    assert await store.read(store.children.finished_nodes, "k3") == {}
