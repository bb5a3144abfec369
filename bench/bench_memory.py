"""memory_search in process (its tool handler on a real database) over 100,000 memory items:
60,000 memory_access items in 600 threads and 40,000 facts (20,000 of them the persona's
own, so the searched scopes hold about 20,400 items of the 100,000).

python -m bench.bench_memory [--runs 500]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from connectors.base import ThreadKey
from gateway.config import Settings
from gateway.errors import RefusedError
from gateway.personas import Persona
from gateway.store import facts, memory
from gateway.store.db import Database, open_database
from gateway.store.threads import upsert_thread
from tools.base import ToolContext
from tools.memory import memory_search

THREADS = 600
ITEMS_PER_THREAD = 100
FACTS = 40_000
PERSONA_FACTS = 20_000
QUERIES = [
    "deploy",
    "deploy friday",
    '"release checklist"',
    "migrat*",
    "invoice OR billing",
    "customer NOT refund",
    "(database OR cache) AND latency",
    "word1234",
    "word17 word42",
    "standup",
    "word0",  # in nearly every item: the worst case, every item of the scopes ranked
]
SPICE = ["deploy", "friday", "release checklist", "migration", "invoice", "billing", "customer", "refund",
         "database", "cache", "latency", "standup", "migrate"]  # fmt: skip


def _text(rng: random.Random, vocabulary: list[str], weights: list[float]) -> str:
    words = rng.choices(vocabulary, weights, k=rng.randint(8, 30))
    if rng.random() < 0.2:
        words.insert(rng.randrange(len(words)), rng.choice(SPICE))
    return " ".join(words)


async def _seed(db: Database) -> int:
    rng = random.Random(7)
    vocabulary = [f"word{i}" for i in range(5000)]
    weights = [1 / (i + 1) for i in range(len(vocabulary))]  # Zipf: a few words are everywhere
    thread_ids = []
    for i in range(THREADS):
        row = await db.run_transaction(
            upsert_thread, ThreadKey("bench", f"chat{i}"), chat_type="group", persona="bench", now=1.0
        )
        thread_ids.append(row.id)

    def items(conn: sqlite3.Connection, chunk: list[int]) -> None:
        for tid in chunk:
            for j in range(ITEMS_PER_THREAD):
                kind = ("note", "fact", "summary")[j % 3]
                memory.put_item(conn, tid, "bench", f"k{j}", kind, _text(rng, vocabulary, weights), 1.0 + j)

    def add_facts(conn: sqlite3.Connection, keys: list[facts.ScopeKey]) -> None:
        for key in keys:
            facts.add_fact(
                conn, key, category=rng.choice(facts.CATEGORIES), content=_text(rng, vocabulary, weights),
                evidence=None, now=2.0,
            )  # fmt: skip

    for start in range(0, THREADS, 50):
        await db.run_transaction(items, thread_ids[start : start + 50])
    persona = facts.ScopeKey("persona", "bench", "")
    others = [
        facts.ScopeKey("user", "bench", facts.user_owner("bench", f"u{i % 500}"))
        for i in range(FACTS - PERSONA_FACTS)
    ]
    for _ in range(0, PERSONA_FACTS, 5000):
        await db.run_transaction(add_facts, [persona] * 5000)
    for start in range(0, len(others), 5000):
        await db.run_transaction(add_facts, others[start : start + 5000])
    return thread_ids[0]


def _pct(times: list[float], p: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = await open_database(Path(tmp) / "talon.db")
        try:
            started = time.perf_counter()
            thread_id = await _seed(db)
            seeded = time.perf_counter() - started
            total = await db.read(lambda conn: conn.execute("SELECT COUNT(*) FROM memory_fts").fetchone()[0])
            persona = Persona(
                name="bench", provider="x", model="m", description=None,
                capabilities=("memory.access:persona",), system_prompt="", path=Path(tmp),
            )  # fmt: skip
            ctx = ToolContext(
                thread_id=thread_id, persona=persona, db=db, settings=Settings(), sender_id="u1"
            )
            for query in QUERIES:  # warm the page cache once
                await memory_search.TOOL.handler(ctx, {"query": query})
            times: dict[str, list[float]] = {q: [] for q in QUERIES}
            hits = dict.fromkeys(QUERIES, 0)
            for i in range(runs):
                query = QUERIES[i % len(QUERIES)]
                t0 = time.perf_counter()
                result = await memory_search.TOOL.handler(ctx, {"query": query})
                times[query].append((time.perf_counter() - t0) * 1000)
                hits[query] = len(result["results"])
            every = [t for ts in times.values() for t in ts]
            hostile = " OR ".join(f"{a}{b}*" for a, b in zip("wdcmrsilbf", "oeauetnaie", strict=True))
            t0 = time.perf_counter()
            try:
                outcome = (
                    f"{len((await memory_search.TOOL.handler(ctx, {'query': hostile}))['results'])} results"
                )
            except RefusedError as exc:
                outcome = f"refused: {exc}"
            print(f"  hostile {hostile!r}: {(time.perf_counter() - t0) * 1000:.0f} ms, {outcome}")
            print(f"{total:,} items indexed (seeded in {seeded:.1f} s)")
            for query in QUERIES:
                print(
                    f"  {query!r:40} p50 {statistics.median(times[query]):6.2f} ms  ({hits[query]} results)"
                )
            print(f"memory_search over {total:,} items: p50 {statistics.median(every):.2f} ms, "
                  f"p90 {_pct(every, 0.9):.2f} ms, max {max(every):.2f} ms ({runs} calls)")  # fmt: skip
        finally:
            await db.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=500)
    asyncio.run(main(parser.parse_args().runs))
