"""RunTrace: what it records with and without content, its caps, children's traces and the
retention sweep of its writes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from connectors.base import ThreadKey
from gateway.budgets import BudgetLimit
from gateway.runtime.model import ChatMessage, Usage
from gateway.store.db import Database, open_database
from gateway.store.runs import start_run
from gateway.store.threads import upsert_thread
from gateway.store.traces import run_events
from gateway.tracing import CONTENT_CHARS, MAX_EVENTS, NULL_TRACE, PURGE_EVERY, RunTrace


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    try:
        yield database
    finally:
        await database.close()


async def _run_id(db: Database) -> int:
    thread = await db.run_transaction(
        upsert_thread, ThreadKey("c", "x"), chat_type="dm", persona="p", now=1.0
    )
    return await db.run_transaction(start_run, thread.id, "p", "m", 1.0)


async def _events(db: Database, run_id: int) -> list[dict[str, object]]:
    return await db.read(lambda c: [e.as_dict() for e in run_events(c, run_id)])


def _model_call(trace: RunTrace, text: str = "the answer") -> None:
    trace.model_call(
        model="m",
        usage=Usage(3, 4),
        latency_ms=12.34567,
        stop_reason="end_turn",
        tool_calls=0,
        system="SYSTEM",
        messages=[ChatMessage("user", "PROMPT")],
        text=text,
    )


async def test_without_content_only_counts_and_names_are_written(db: Database) -> None:
    run_id = await _run_id(db)
    trace = RunTrace(run_id, persona="p", thread_id=1)
    _model_call(trace)
    trace.tool_call(
        name="t",
        decision="allowed",
        duration_ms=1,
        result_bytes=9,
        error_class=None,
        arguments={"secret": "ARG"},
        result="RESULT",
    )
    assert await db.run_transaction(trace.write) == 2
    events = await _events(db, run_id)
    assert events[0]["payload"] == {
        "input_tokens": 3,
        "output_tokens": 4,
        "stop_reason": "end_turn",
        "tool_calls": 0,
    }
    assert events[0]["duration_ms"] == 12.346
    assert events[1]["payload"] == {"decision": "allowed", "result_bytes": 9}
    assert trace.pending == 0 and await db.run_transaction(trace.write) == 0  # written once


async def test_content_is_kept_and_cut_when_long(db: Database) -> None:
    run_id = await _run_id(db)
    trace = RunTrace(run_id, persona="p", thread_id=1, content=True)
    _model_call(trace, text="x" * (CONTENT_CHARS + 50))
    await db.run_transaction(trace.write)
    [event] = await _events(db, run_id)
    payload = event["payload"]
    assert isinstance(payload, dict)
    assert payload["system"] == "SYSTEM" and payload["prompt"] == [{"role": "user", "content": "PROMPT"}]
    assert payload["text"].startswith("x" * CONTENT_CHARS) and payload["text"].endswith(
        f"[{CONTENT_CHARS + 50} chars]"
    )


async def test_a_run_keeps_at_most_max_events_and_says_how_many_it_dropped(db: Database) -> None:
    run_id = await _run_id(db)
    trace = RunTrace(run_id, persona="p", thread_id=1)
    for i in range(MAX_EVENTS + 7):
        trace.phase("step", i=i)
    assert await db.run_transaction(trace.write) == MAX_EVENTS + 1
    events = await _events(db, run_id)
    assert events[-1]["name"] == "events_dropped" and events[-1]["payload"] == {"count": 7}
    assert [e["seq"] for e in events] == list(range(1, MAX_EVENTS + 2))


async def test_a_childs_trace_shares_the_buffer_and_names_the_root(db: Database) -> None:
    root, child_run = await _run_id(db), await _run_id(db)
    trace = RunTrace(root, persona="p", thread_id=1)
    trace.child_started(child_run, name="researcher")
    child = trace.child_trace(child_run, persona="p", thread_id=1)
    _model_call(child)
    trace.child_ended(child_run, name="researcher", status="completed", input_tokens=3, output_tokens=4)
    trace.budget(BudgetLimit("max_children", 1, 1), {"children": 1})
    await db.run_transaction(trace.write)
    [child_event] = await _events(db, child_run)
    assert child_event["root_run_id"] == root and child_event["kind"] == "model_call"
    kinds = [(e["kind"], e["payload"].get("event")) for e in await _events(db, root)]  # type: ignore[union-attr]
    assert kinds == [("child", "started"), ("child", "ended"), ("budget", None)]


async def test_writes_sweep_events_older_than_the_retention(db: Database) -> None:
    run_id = await _run_id(db)
    now = [1_000_000.0]
    old = RunTrace(run_id, persona="p", thread_id=1, clock=lambda: now[0])
    old.phase("long_ago")
    await db.run_transaction(old.write)
    now[0] += 3 * 86_400
    for _ in range(PURGE_EVERY):  # one write in PURGE_EVERY sweeps
        fresh = RunTrace(run_id, persona="p", thread_id=1, retention_days=2, clock=lambda: now[0])
        fresh.phase("today")
        await db.run_transaction(fresh.write)
    assert [e["name"] for e in await _events(db, run_id)] == ["today"] * PURGE_EVERY


async def test_the_null_trace_records_nothing_and_its_children_neither() -> None:
    _model_call(NULL_TRACE)
    NULL_TRACE.child_trace(5, persona="p", thread_id=1).phase("x")
    assert NULL_TRACE.pending == 0
    assert NULL_TRACE.child_trace(5, persona="p", thread_id=1) is NULL_TRACE
