"""runs: a turn's run from start to its end, the answer kept for a retry, and what a restart
finds left over."""

from __future__ import annotations

import pytest

from connectors.base import ThreadKey
from gateway.store.runs import KeptAnswer
from tests.unit.store.contract.conftest import Backend


@pytest.fixture
async def thread_id(store: Backend) -> int:
    row = await store.write(
        store.threads.upsert_thread, ThreadKey("c", "chat"), chat_type="dm", persona="p", now=1.0
    )
    return row.id


async def test_a_run_without_a_kept_answer_resumes_nothing(store: Backend, thread_id: int) -> None:
    run_id = await store.write(store.runs.start_run, thread_id, "p", "fake:model", 1.0)
    assert await store.write(store.runs.resume_kept, run_id) is None


async def test_a_kept_answer_comes_back_whole_on_the_retry(store: Backend, thread_id: int) -> None:
    run_id = await store.write(store.runs.start_run, thread_id, "p", "fake:model", 1.0)
    answer = KeptAnswer("caf\u00e9 \U0001f600 and a lone \ud800 half", ["channel_send"], 120, 30, 2)
    await store.write(store.runs.keep_answer, run_id, answer, error="reply not saved: boom", now=2.0)
    assert await store.write(store.runs.resume_kept, run_id) == answer
    assert await store.write(store.runs.resume_kept, run_id) == answer  # kept until the reply commits


async def test_a_restart_interrupts_running_runs_and_ends_open_sessions(
    store: Backend, thread_id: int
) -> None:
    running = await store.write(store.runs.start_run, thread_id, "p", "m", 1.0)
    other = await store.write(store.runs.start_run, thread_id, "p", "m", 1.0)
    done = await store.write(store.runs.start_run, thread_id, "p", "m", 1.0)
    session = await store.write(store.runs.start_run, thread_id, "p", "mcp-session", 1.0, status="session")
    await store.write(
        store.runs.complete_run, done, model="m2", input_tokens=5, output_tokens=3, model_calls=1, now=2.0
    )
    await store.write(store.runs.end_run, other, "canceled", "stopped by /stop", 2.0)
    assert await store.write(store.runs.interrupt_running, 3.0) == 1
    assert await store.write(store.runs.interrupt_running, 4.0) == 0
    assert await store.write(store.runs.end_sessions, 3.0) == 1
    assert await store.write(store.runs.end_sessions, 4.0) == 0
    assert len({running, other, done, session}) == 4
