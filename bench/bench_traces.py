"""Run traces: what recording a turn's trace adds to the turn, in process.

One turn is the agent loop with an instant in-process model (three tool rounds of two calls,
then the answer: 4 model calls, 6 tool calls, so 10 events plus the turn's two phases) and
the turn's commit transaction (complete_run). Traced turns record into a RunTrace and write
it in that same transaction, sweeping old events as deployed; untraced turns use the loop's
no-op trace. The two alternate, so both see the same machine.

python -m bench.bench_traces [--turns 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from connectors.base import ThreadKey
from gateway.runtime.agent import ToolOutcome, run_agent
from gateway.runtime.model import (
    ChatMessage,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from gateway.store.db import Database, open_database
from gateway.store.runs import complete_run, start_run
from gateway.store.threads import upsert_thread
from gateway.tracing import NULL_TRACE, RunTrace

ROUNDS = 3


class _InstantModel:
    name = "instant"

    async def complete(self, request: ModelRequest, on_text: TextDelta | None = None) -> ModelResponse:
        rounds = sum(1 for m in request.messages if m.role == "assistant")
        if rounds < ROUNDS:
            calls = tuple(ToolCall(f"c{rounds}{i}", "lookup", {"key": f"k{i}"}) for i in range(2))
            return ModelResponse("", calls, "tool_use", Usage(500, 20))
        return ModelResponse("done", (), "end_turn", Usage(600, 10))

    async def aclose(self) -> None:
        return None


class _InstantTools:
    def specs(self) -> Sequence[ToolSpec]:
        return (ToolSpec("lookup", "look a key up", {"type": "object"}),)

    async def call(self, call: ToolCall) -> ToolOutcome:
        return ToolOutcome('{"value": "something of a modest size"}')


async def _turn(db: Database, run_id: int, thread_id: int, traced: bool) -> float:
    started = time.perf_counter()
    trace = (
        RunTrace(run_id, persona="bench", thread_id=thread_id, retention_days=30) if traced else NULL_TRACE
    )
    trace.phase("turn_started", messages=1, kept=False)
    result = await run_agent(
        _InstantModel(),
        model="m",
        system="You are a bench.",
        messages=[ChatMessage("user", "go")],
        tools=_InstantTools(),
        max_turns=12,
        max_tokens=100,
        call_timeout=10,
        trace=trace,
    )
    trace.phase("turn_ended", outcome="completed", silent=False)

    def commit(conn: sqlite3.Connection) -> None:
        complete_run(
            conn,
            run_id,
            model="m",
            input_tokens=result.usage.input_tokens,
            output_tokens=result.usage.output_tokens,
            model_calls=result.model_calls,
            now=time.time(),
        )
        trace.write(conn)

    await db.run_transaction(commit)
    return (time.perf_counter() - started) * 1000


async def main(turns: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = await open_database(Path(tmp) / "talon.db")
        try:
            thread = await db.run_transaction(
                upsert_thread, ThreadKey("console", "bench"), chat_type="dm", persona="bench", now=time.time()
            )
            timings: dict[bool, list[float]] = {False: [], True: []}
            for i in range(turns * 2 + 100):
                traced = i % 2 == 1
                run_id = await db.run_transaction(start_run, thread.id, "bench", "m", time.time())
                elapsed = await _turn(db, run_id, thread.id, traced)
                if i >= 100:  # warm-up
                    timings[traced].append(elapsed)
        finally:
            await db.close()
    plain, traced = statistics.median(timings[False]), statistics.median(timings[True])
    print(f"turn without trace: p50 {plain:.3f} ms; with trace: p50 {traced:.3f} ms ({turns} turns each)")
    print(f"trace overhead per turn (12 events, written in the turn's commit): p50 {traced - plain:.3f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    asyncio.run(main(parser.parse_args().turns))
