"""``/metrics`` with 100,000 messages stored, scraped over loopback HTTP from a real HttpServer.

The database holds ``--threads`` threads of ``--messages`` messages each (tests/console_seed.py),
a queue item per user message (done but a few pending, leased and dead), an outbox row per
assistant message (sent but a few pending, failed and unknown) and usage rollups. An
:class:`~gateway.http.server.HttpServer` with only the metrics feature listens on 127.0.0.1;
an aiohttp client GETs ``/metrics`` ``--rounds`` times. Server time is the handler's own time
(read of the stored gauges on the reader thread and rendering); round trip includes the client.

python -m bench.bench_metrics [--threads 100] [--messages 1000] [--rounds 200]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

from gateway.http.metrics import MetricsFeature
from gateway.http.server import HttpServer
from gateway.http.settings import HttpSettings
from gateway.store.db import open_database
from gateway.usage import Periods
from tests.console_seed import seed

_QUEUE_OPEN = {0: "pending", 1: "leased", 2: "dead"}  # per thread; the rest done
_OUTBOX_OPEN = {0: "pending", 1: "failed", 2: "unknown"}


def _fill(conn: sqlite3.Connection, threads: int, messages: int) -> None:
    """Queue and outbox rows for every stored message, and a day's and month's usage."""
    seed(conn, threads=threads, messages=messages)
    now = time.time()
    rows = conn.execute("SELECT id, thread_id, role, created_at FROM messages ORDER BY id").fetchall()
    last: dict[tuple[int, str], int] = {}
    for _, thread_id, role, _ in rows:
        last[(thread_id, role)] = last.get((thread_id, role), -1) + 1
    queue, outbox = [], []
    seen: dict[tuple[int, str], int] = {}
    for msg_id, thread_id, role, created in rows:
        n = seen[(thread_id, role)] = seen.get((thread_id, role), -1) + 1
        from_end = last[(thread_id, role)] - n  # the newest few rows of a thread are still open
        if role == "user":
            status = _QUEUE_OPEN.get(from_end, "done") if thread_id % 10 == 0 else "done"
            queue.append((thread_id, msg_id, status, created, created, created))
        else:
            status = _OUTBOX_OPEN.get(from_end, "sent") if thread_id % 10 == 0 else "sent"
            outbox.append((thread_id, msg_id, f"chat-{thread_id}", status, created, created))
    conn.executemany(
        "INSERT INTO queue_items (thread_id, message_id, status, available_at, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        queue,
    )
    conn.executemany(
        "INSERT INTO outbox (thread_id, message_id, channel, chat_id, format, text, plain, status, "
        "available_at, created_at) VALUES (?, ?, 'console', ?, 'plain', 'ok', 'ok', ?, ?, ?)",
        outbox,
    )
    day, month = Periods.at(now, "UTC").names
    usage = [
        (scope, subject, period, 1000 * i, 0.01 * i)
        for i, (scope, subject) in enumerate(
            [("persona", "assistant"), ("channel", "console"), ("user", "u1")], start=1
        )
        for period in (day, month)
    ]
    conn.executemany(
        "INSERT OR REPLACE INTO usage_rollups (scope, subject, period, tokens, cost) VALUES (?, ?, ?, ?, ?)",
        usage,
    )


def _pct(times: list[float], q: float) -> float:
    return sorted(times)[max(0, int(len(times) * q) - 1)]


async def main(threads: int, messages: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = await open_database(Path(tmp) / "talon.db")
        started = time.perf_counter()
        await db.run_transaction(lambda conn: _fill(conn, threads, messages))
        counts = await db.read(
            lambda c: [
                c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for t in ("messages", "queue_items", "outbox")
            ]
        )
        print(
            f"seeded {counts[0]:,} messages, {counts[1]:,} queue items, {counts[2]:,} outbox rows "
            f"in {time.perf_counter() - started:.1f} s"
        )
        feature = MetricsFeature(db, {}, token=None, timezone="UTC")
        server_times: list[float] = []
        scrape = feature.scrape

        async def timed(request: web.Request) -> web.Response:
            t0 = time.perf_counter()
            try:
                return await scrape(request)
            finally:
                server_times.append((time.perf_counter() - t0) * 1000)

        feature.scrape = timed  # type: ignore[method-assign]
        server = HttpServer(HttpSettings(listen="127.0.0.1:0"), [feature])
        await server.start()
        try:
            round_trips: list[float] = []
            async with aiohttp.ClientSession() as http:
                for _ in range(rounds):
                    t0 = time.perf_counter()
                    async with http.get(f"{server.url}/metrics") as resp:
                        body = await resp.read()
                        assert resp.status == 200 and b"talon_dead_letters" in body, resp.status
                    round_trips.append((time.perf_counter() - t0) * 1000)
        finally:
            await server.stop()
            await db.close()
    for name, times in (("server time", server_times), ("round trip", round_trips)):
        print(
            f"/metrics {name:<12} p50 {statistics.median(times):6.2f} ms  p90 {_pct(times, 0.9):6.2f} ms  "
            f"max {max(times):6.2f} ms  ({len(times)} scrapes)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=100)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.threads, args.messages, args.rounds))
