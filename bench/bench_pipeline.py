"""Pipeline intake: events/s and commit latency with the SQLite store.

Many producers (as connectors would be) push events concurrently; each event is one
committed transaction (dedupe, thread upsert, message, queue item).

    python -m bench.bench_pipeline [--events 10000] [--producers 32]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from connectors.base import InboundEvent, Sender, ThreadKey
from gateway.config import Binding
from gateway.heap import settle_heap
from gateway.pipeline import Bindings, Pipeline
from gateway.store.db import open_database


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def _event(i: int, threads: int) -> InboundEvent:
    return InboundEvent(
        "bench",
        f"e{i}",
        ThreadKey("bench", f"chat{i % threads}"),
        "dm",
        Sender("u1", "User"),
        f"message number {i}",
    )


async def run_rate(events: int, rate: float, threads: int) -> dict[str, float]:
    """Open loop: events arrive at ``rate``/s whatever the store does; latency per event."""
    with tempfile.TemporaryDirectory() as tmp:
        db = await open_database(Path(tmp) / "talon.db")
        pipeline = Pipeline(db, Bindings([Binding(channel="bench", persona="p")], ["p"]))
        latencies: list[float] = []

        async def one(i: int) -> None:
            t0 = time.perf_counter()
            await pipeline.ingest(_event(i, threads))
            latencies.append(time.perf_counter() - t0)

        tasks = []
        started = time.perf_counter()
        for i in range(events):
            delay = started + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
        await db.close()
    return {
        "events/s": events / elapsed,
        "p50 ms": statistics.median(latencies) * 1000,
        "p99 ms": pct(latencies, 0.99) * 1000,
        "max ms": max(latencies) * 1000,
    }


async def run(events: int, producers: int, threads: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        db = await open_database(Path(tmp) / "talon.db")
        pipeline = Pipeline(db, Bindings([Binding(channel="bench", persona="p")], ["p"]))
        latencies: list[float] = []
        counter = iter(range(events))

        async def producer() -> None:
            for i in counter:
                t0 = time.perf_counter()
                await pipeline.ingest(_event(i, threads))
                latencies.append(time.perf_counter() - t0)

        started = time.perf_counter()
        await asyncio.gather(*(producer() for _ in range(producers)))
        elapsed = time.perf_counter() - started
        await db.close()
    return {
        "events/s": events / elapsed,
        "p50 ms": statistics.median(latencies) * 1000,
        "p99 ms": pct(latencies, 0.99) * 1000,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--producers", type=int, default=8)
    ap.add_argument("--threads", type=int, default=200)
    ap.add_argument("--rate", type=float, default=2000.0, help="sustained arrival rate for the latency run")
    args = ap.parse_args()
    settle_heap()  # the collector settings `talon run` uses once started
    result = asyncio.run(run_rate(args.events, args.rate, args.threads))
    print(f"sustained: {args.events} events arriving at {args.rate:g}/s over {args.threads} threads")
    for key, value in result.items():
        print(f"  {key:>9}: {value:,.2f}")
    result = asyncio.run(run(args.events, args.producers, args.threads))
    print(f"saturation: {args.events} events from {args.producers} concurrent producers")
    for key, value in result.items():
        print(f"  {key:>9}: {value:,.2f}")


if __name__ == "__main__":
    main()
