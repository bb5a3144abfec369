"""delegation: A2A and background tasks opened on a thread of their own under a limit, their
turns' states, their results and where those are posted."""

from __future__ import annotations

import pytest

from connectors.base import ThreadKey
from gateway.store.delegation import (
    A2ATask,
    BackgroundTask,
    NewA2ATask,
    NewBackgroundTask,
    TaskLimitError,
)
from gateway.store.queue import Batch
from tests.unit.store.contract.conftest import Backend


@pytest.fixture
async def caller_thread(store: Backend) -> int:
    row = await store.write(
        store.threads.upsert_thread, ThreadKey("console", "main"), chat_type="dm", persona="alice", now=1.0
    )
    return row.id


def a2a(task_id: str, caller_thread: int, target: str = "bob", *, deliver: bool = False) -> NewA2ATask:
    return NewA2ATask(task_id, "alice", caller_thread, target, f"please {task_id}", ["alice"], deliver)


def background(task_id: str, origin: int) -> NewBackgroundTask:
    return NewBackgroundTask(
        id=task_id,
        persona="alice",
        profile="bob",
        origin_thread_id=origin,
        prompt="dig",
        text="dig\n\n[working directory: /w]",
        provider="local",
        working_directory="/w",
        timeout_seconds=900.0,
    )


async def test_an_a2a_task_gets_its_own_thread_and_a_queued_first_message(
    store: Backend, caller_thread: int
) -> None:
    thread_id = await store.write(store.delegation.open_task, a2a("t1", caller_thread), limit=5, now=2.0)
    thread = await store.read(store.threads.get_thread, thread_id)
    assert thread is not None
    assert (thread.key, thread.persona, thread.title) == (ThreadKey("a2a", "t1"), "bob", "a2a task t1")
    messages = await store.read(store.messages.messages_after, thread_id, after=0, limit=10)
    assert [(m.role, m.sender_name, m.text) for m in messages] == [("user", "alice", "please t1")]
    batch = await store.write(store.queue.lease_batch, thread_id, 60.0, 2.0)
    assert isinstance(batch, Batch) and batch.message_ids == (messages[0].id,)

    task = await store.read(store.delegation.a2a_task, "t1")
    assert isinstance(task, A2ATask)
    assert (task.caller_persona, task.caller_thread_id, task.target_persona, task.target_thread_id) == (
        "alice",
        caller_thread,
        "bob",
        thread_id,
    )
    assert (task.message, task.state, task.chain, task.deliver, task.result, task.error) == (
        "please t1",
        "submitted",
        ["alice"],
        False,
        None,
        None,
    )
    assert task.report_to is None


async def test_a2a_tasks_are_limited_per_target_and_finished_ones_do_not_count(
    store: Backend, caller_thread: int
) -> None:
    first = await store.write(store.delegation.open_task, a2a("t1", caller_thread), limit=2, now=1.0)
    await store.write(store.delegation.open_task, a2a("t2", caller_thread), limit=2, now=1.0)
    with pytest.raises(TaskLimitError) as refused:
        await store.write(store.delegation.open_task, a2a("t3", caller_thread), limit=2, now=1.0)
    assert (refused.value.active, refused.value.limit) == (2, 2)
    assert await store.read(store.delegation.a2a_task, "t3") is None
    assert "t3" not in [t.chat_id for t in await store.read(store.threads.recent_threads, 10)]

    await store.write(store.delegation.open_task, a2a("c1", caller_thread, target="carol"), limit=2, now=1.0)
    await store.write(
        store.delegation.finish_task, "a2a", first, state="completed", result="ok", error=None, now=2.0
    )
    await store.write(store.delegation.open_task, a2a("t3", caller_thread), limit=2, now=3.0)
    assert await store.read(store.delegation.a2a_task, "t3") is not None


async def test_background_tasks_are_limited_all_together(store: Backend, caller_thread: int) -> None:
    thread_id = await store.write(
        store.delegation.open_task, background("b1", caller_thread), limit=1, now=1.0
    )
    with pytest.raises(TaskLimitError) as refused:
        await store.write(store.delegation.open_task, background("b2", caller_thread), limit=1, now=1.0)
    assert refused.value.active == 1
    with pytest.raises(TaskLimitError):  # the A2A limit is the target's, the background one everyone's
        await store.write(store.delegation.open_task, background("b2", caller_thread + 1), limit=1, now=1.0)

    thread = await store.read(store.threads.get_thread, thread_id)
    assert thread is not None and (thread.key, thread.persona) == (ThreadKey("background", "b1"), "bob")
    messages = await store.read(store.messages.messages_after, thread_id, after=0, limit=10)
    assert [(m.role, m.sender_name, m.text) for m in messages] == [
        ("user", "alice", "dig\n\n[working directory: /w]")
    ]
    task = await store.read(store.delegation.background_task, "b1", caller_thread)
    assert isinstance(task, BackgroundTask)
    assert (task.persona, task.profile, task.thread_id, task.prompt, task.provider) == (
        "alice",
        "bob",
        thread_id,
        "dig",
        "local",
    )
    assert (task.working_directory, task.timeout_seconds, task.state) == ("/w", 900.0, "queued")
    assert task.report_to == caller_thread
    assert await store.read(store.delegation.background_task_of_thread, thread_id) == task


async def test_a_task_is_visible_only_from_the_thread_that_started_it(
    store: Backend, caller_thread: int
) -> None:
    await store.write(store.delegation.open_task, a2a("t1", caller_thread), limit=5, now=1.0)
    await store.write(store.delegation.open_task, background("b1", caller_thread), limit=5, now=1.0)
    assert await store.read(store.delegation.a2a_task, "t1", caller_thread_id=caller_thread) is not None
    assert await store.read(store.delegation.a2a_task, "t1", caller_thread_id=caller_thread + 99) is None
    assert await store.read(store.delegation.background_task, "b1", caller_thread + 99) is None
    assert await store.read(store.delegation.background_task_of_thread, caller_thread) is None


async def test_the_chain_of_a_task_thread_is_what_delegated_to_it(store: Backend, caller_thread: int) -> None:
    task = NewA2ATask("t1", "bob", caller_thread, "carol", "go", ["alice", "bob"], False)
    thread_id = await store.write(store.delegation.open_task, task, limit=5, now=1.0)
    assert await store.read(store.delegation.task_chain, thread_id) == ["alice", "bob"]
    assert await store.read(store.delegation.task_chain, caller_thread) == []


@pytest.mark.parametrize("kind", ["a2a", "background"])
async def test_a_turn_makes_a_task_working_and_its_end_finishes_it_once(
    store: Backend, caller_thread: int, kind: str
) -> None:
    new = a2a("t1", caller_thread) if kind == "a2a" else background("t1", caller_thread)
    thread_id = await store.write(store.delegation.open_task, new, limit=5, now=1.0)

    async def state() -> str:
        if kind == "a2a":
            task = await store.read(store.delegation.a2a_task, "t1")
        else:
            task = await store.read(store.delegation.background_task, "t1", caller_thread)
        assert task is not None
        return task.state

    await store.write(store.delegation.mark_working, kind, thread_id, 2.0)
    assert await state() == ("working" if kind == "a2a" else "running")
    finished = await store.write(
        store.delegation.finish_task, kind, thread_id, state="failed", result=None, error="boom", now=3.0
    )
    assert finished is not None
    assert (finished.id, finished.state, finished.result, finished.error, finished.updated_at) == (
        "t1",
        "failed",
        None,
        "boom",
        3.0,
    )
    assert await state() == "failed"
    again = await store.write(
        store.delegation.finish_task, kind, thread_id, state="completed", result="late", error=None, now=4.0
    )
    assert again is None
    await store.write(store.delegation.mark_working, kind, thread_id, 5.0)
    assert await state() == "failed"
    assert (
        await store.write(
            store.delegation.finish_task,
            kind,
            caller_thread,
            state="completed",
            result="x",
            error=None,
            now=4.0,
        )
        is None
    )


async def test_an_awaited_task_reports_back_only_once_the_caller_stops_waiting(
    store: Backend, caller_thread: int
) -> None:
    waited = await store.write(store.delegation.open_task, a2a("t1", caller_thread), limit=5, now=1.0)
    later = await store.write(store.delegation.open_task, a2a("t2", caller_thread), limit=5, now=1.0)
    await store.write(store.delegation.deliver_later, "t2")
    one = await store.write(
        store.delegation.finish_task, "a2a", waited, state="completed", result="a", error=None, now=2.0
    )
    two = await store.write(
        store.delegation.finish_task, "a2a", later, state="completed", result="b", error=None, now=2.0
    )
    assert one is not None and one.report_to is None
    assert two is not None and two.report_to == caller_thread

    finished = await store.write(store.delegation.open_task, a2a("t3", caller_thread), limit=5, now=1.0)
    await store.write(
        store.delegation.finish_task, "a2a", finished, state="completed", result="c", error=None, now=2.0
    )
    await store.write(store.delegation.deliver_later, "t3")  # too late: it has ended
    task = await store.read(store.delegation.a2a_task, "t3")
    assert task is not None and task.deliver is False


async def test_a_posted_message_gives_the_thread_a_turn(store: Backend, caller_thread: int) -> None:
    message_id = await store.write(
        store.delegation.post_message, caller_thread, "system", "Task t1 done", 5.0
    )
    messages = await store.read(store.messages.messages_after, caller_thread, after=0, limit=10)
    assert [(m.id, m.role, m.sender_name, m.text) for m in messages] == [
        (message_id, "system", None, "Task t1 done")
    ]
    batch = await store.write(store.queue.lease_batch, caller_thread, 60.0, 5.0)
    assert isinstance(batch, Batch) and batch.message_ids == (message_id,)


async def test_canceling_a_background_task_ends_it_and_its_pending_work(
    store: Backend, caller_thread: int
) -> None:
    thread_id = await store.write(
        store.delegation.open_task, background("b1", caller_thread), limit=5, now=1.0
    )
    assert await store.write(store.delegation.cancel_background_task, "b1", 2.0) is True
    assert await store.write(store.queue.cancel_pending, thread_id, 2.0) == 1
    assert await store.write(store.queue.lease_batch, thread_id, 60.0, 3.0) is None
    task = await store.read(store.delegation.background_task, "b1", caller_thread)
    assert task is not None and (task.state, task.updated_at) == ("canceled", 2.0)
    assert await store.write(store.delegation.cancel_background_task, "b1", 3.0) is False
