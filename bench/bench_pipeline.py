"""Pipeline intake: events/s and commit latency with the SQLite store.

Many producers (as connectors would be) push events concurrently; each event is one
committed transaction (dedupe, thread upsert, message, queue item). ``--postgres`` runs the
same on a throwaway PostgreSQL server (tests/pg_server.py, Debian's binaries) after SQLite,
and prints the ratio.

    python -m bench.bench_pipeline [--events 10000] [--producers 32] [--postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from connectors.base import InboundEvent, Sender, ThreadKey
from gateway.config import Binding
from gateway.heap import settle_heap
from gateway.pipeline import Bindings, Pipeline
from gateway.store.engines import open_store


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


async def run_rate(events: int, rate: float, threads: int, url: Any = None) -> dict[str, float]:
    """Open loop: events arrive at ``rate``/s whatever the store does; latency per event."""
    with tempfile.TemporaryDirectory() as tmp:
        db = await open_store(url() if callable(url) else url, Path(tmp))
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


async def run(events: int, producers: int, threads: int, url: Any = None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        db = await open_store(url() if callable(url) else url, Path(tmp))
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


def _show(title: str, result: dict[str, float]) -> None:
    print(title)
    for key, value in result.items():
        print(f"  {key:>9}: {value:,.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--producers", type=int, default=8)
    ap.add_argument("--threads", type=int, default=200)
    ap.add_argument("--rate", type=float, default=2000.0, help="sustained arrival rate for the latency run")
    ap.add_argument("--postgres", action="store_true", help="also on a throwaway PostgreSQL server")
    args = ap.parse_args()
    settle_heap()  # the collector settings `talon run` uses once started
    engines: list[tuple[str, Any]] = [("sqlite", None)]
    with contextlib.ExitStack() as stack:
        if args.postgres:
            from tests.pg_server import running_server

            server = stack.enter_context(running_server())
            if server is None:
                raise SystemExit("PostgreSQL is not installed (apt-get install postgresql)")
            engines.append(("postgresql", server.new_database))
        saturation = {}
        for name, url in engines:
            result = asyncio.run(run_rate(args.events, args.rate, args.threads, url))
            _show(
                f"[{name}] sustained: {args.events} events arriving at {args.rate:g}/s over {args.threads} threads",
                result,
            )
            result = asyncio.run(run(args.events, args.producers, args.threads, url))
            _show(
                f"[{name}] saturation: {args.events} events from {args.producers} concurrent producers",
                result,
            )
            saturation[name] = result["events/s"]
        if args.postgres:
            print(f"postgresql / sqlite saturation: {saturation['postgresql'] / saturation['sqlite']:.2f}x")


if __name__ == "__main__":
    main()
