"""run traces: a run's events come back in order and filtered; a persona's recent runs and a
search over them see only that persona; run summaries count tool calls; the sweep deletes by age."""

from __future__ import annotations

import json

import pytest

from connectors.base import ThreadKey
from gateway.store.traces import TraceEvent
from tests.unit.store.contract.conftest import Backend


@pytest.fixture
async def thread_id(store: Backend) -> int:
    row = await store.write(
        store.threads.upsert_thread, ThreadKey("c", "chat"), chat_type="dm", persona="ann", now=1.0
    )
    return row.id


def _event(
    run_id: int,
    seq: int,
    kind: str,
    name: str,
    *,
    persona: str = "ann",
    at: float = 10.0,
    error: str | None = None,
    **payload: object,
) -> TraceEvent:
    return TraceEvent(run_id, None, 1, persona, seq, kind, name, at + seq, 1.5, error, json.dumps(payload))


async def _run(store: Backend, thread_id: int, persona: str = "ann") -> int:
    return await store.write(store.runs.start_run, thread_id, persona, "fake:m", 5.0)


async def test_a_runs_events_come_back_in_order_with_their_payloads(store: Backend, thread_id: int) -> None:
    run = await _run(store, thread_id)
    events = [
        _event(run, 2, "tool_call", "memory_access", decision="allowed", result_bytes=12),
        _event(run, 1, "model_call", "m", input_tokens=7),
        _event(run, 3, "tool_call", "net_http", error="timeout", decision="allowed"),
    ]
    assert await store.write(store.traces.add_events, events) == 3
    got = await store.read(lambda c: list(store.traces.run_events(c, run)))
    assert [(e.seq, e.kind, e.name) for e in got] == [
        (1, "model_call", "m"),
        (2, "tool_call", "memory_access"),
        (3, "tool_call", "net_http"),
    ]
    assert got[1].payload == {"decision": "allowed", "result_bytes": 12} and got[1].duration_ms == 1.5
    tools = await store.read(lambda c: list(store.traces.run_events(c, run, kinds=["tool_call"])))
    assert [e.name for e in tools] == ["memory_access", "net_http"]
    errors = await store.read(lambda c: list(store.traces.run_events(c, run, errors_only=True)))
    assert [(e.name, e.error_class) for e in errors] == [("net_http", "timeout")]
    named = await store.read(lambda c: list(store.traces.run_events(c, run, name="memory_access")))
    assert [e.seq for e in named] == [2]


async def test_persona_runs_and_search_see_only_that_persona(store: Backend, thread_id: int) -> None:
    first, second, other = (
        await _run(store, thread_id),
        await _run(store, thread_id),
        await _run(store, thread_id, "bob"),
    )
    await store.write(
        store.traces.add_events,
        [
            _event(first, 1, "tool_call", "Net_HTTP"),
            _event(second, 1, "tool_call", "memory_access", note="found NET_http here"),
            _event(other, 1, "tool_call", "net_http", persona="bob"),
        ],
    )
    assert await store.read(store.traces.persona_runs, "ann", limit=10) == [second, first]
    assert await store.read(store.traces.persona_runs, "ann", limit=1) == [second]
    assert await store.read(store.traces.persona_runs, "ann", limit=10, exclude=second) == [first]
    assert await store.read(store.traces.persona_runs, "ann", limit=10, since=10_000.0) == []
    runs = await store.read(store.traces.persona_runs, "ann", limit=10)
    hits = await store.read(lambda c: list(store.traces.search_events(c, runs, "net_http")))
    assert [(h.run_id, h.name) for h in hits] == [(second, "memory_access"), (first, "Net_HTTP")]
    assert await store.read(lambda c: list(store.traces.search_events(c, [], "x"))) == []


async def test_run_summaries_count_tool_calls_and_leave_out_sessions(store: Backend, thread_id: int) -> None:
    run = await _run(store, thread_id)
    await store.write(store.runs.start_run, thread_id, "ann", "mcp-session", 6.0, status="session")
    await store.write(
        store.traces.add_events,
        [
            _event(run, 1, "model_call", "m"),
            _event(run, 2, "tool_call", "a"),
            _event(run, 3, "tool_call", "b"),
        ],
    )
    await store.write(
        store.runs.complete_run, run, model="fake:m", input_tokens=30, output_tokens=4, model_calls=2, now=9.0
    )
    [info] = await store.read(store.traces.recent_runs, limit=10)
    assert (info.id, info.status, info.model_calls, info.tool_calls, info.input_tokens) == (
        run,
        "completed",
        2,
        2,
        30,
    )
    assert await store.read(store.traces.recent_runs, limit=10, thread_id=thread_id + 99) == []
    assert (await store.read(store.traces.get_run, run)) == info
    assert await store.read(store.traces.get_run, run + 99) is None


async def test_the_sweep_deletes_events_older_than_the_cutoff_in_batches(
    store: Backend, thread_id: int
) -> None:
    run = await _run(store, thread_id)
    await store.write(store.traces.add_events, [_event(run, i, "phase", "p", at=0.0) for i in range(1, 8)])
    assert await store.write(store.traces.purge_before, 5.0, batch=3) == 3  # at = seq: 1..4 are old
    assert await store.write(store.traces.purge_before, 5.0, batch=3) == 1
    assert await store.write(store.traces.purge_before, 5.0, batch=3) == 0
    left = await store.read(lambda c: [e.seq for e in store.traces.run_events(c, run)])
    assert left == [5, 6, 7]
