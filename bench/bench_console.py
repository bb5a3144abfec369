"""Web console pages with 100,000 messages stored, in process over loopback HTTP.

The database holds ``--threads`` threads of ``--messages`` messages each (100 x 1,000 by
default), a traced run, memory, a dead letter and a schedule (tests/console_seed.py). A signed-in
admin fetches each page ``--rounds`` times; the figure is the request's whole round trip on
loopback (aiohttp client included), so it bounds the server's time.

python -m bench.bench_console [--threads 100] [--messages 1000] [--rounds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.config import Settings
from gateway.console_settings import ConsoleSettings, ConsoleUser
from gateway.http.console.feature import ConsoleDeps, ConsoleFeature
from gateway.http.console.passwords import hash_password
from gateway.store.db import open_database
from tests.console_seed import seed
from tests.integration.console.test_console_http import DbStatus, _csrf

PASSWORD = "bench password long"


async def main(threads: int, messages: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = await open_database(Path(tmp) / "talon.db")
        started = time.perf_counter()
        seeded = await db.run_transaction(lambda conn: seed(conn, threads=threads, messages=messages))
        print(f"seeded {threads * messages:,} messages in {time.perf_counter() - started:.1f} s")
        user = ConsoleUser(name="ada", role="admin", password_hash=hash_password(PASSWORD))
        settings = Settings(console=ConsoleSettings(users=[user]))
        app = web.Application()
        ConsoleFeature(ConsoleDeps(db, settings, {}, DbStatus(db), lambda _: None)).install(app)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        base = str(server.make_url("/console"))
        try:
            async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
                async with http.get(f"{base}/login") as resp:
                    token = _csrf(await resp.text())
                await http.post(f"{base}/login", data={"csrf": token, "name": "ada", "password": PASSWORD})
                pages = {
                    "overview": "/",
                    "threads": "/threads",
                    "thread (1,000+ messages)": f"/threads/{seeded.thread_id}",
                    "run trace": f"/runs/{seeded.run_id}",
                    "schedules": "/schedules",
                    "schedule history": f"/schedules/{seeded.schedule_id}",
                    "audit (filtered)": "/audit?tool=console.",
                    "usage": "/usage?by=model&since=30d",
                }
                for name, path in pages.items():
                    times = []
                    for _ in range(rounds):
                        t0 = time.perf_counter()
                        async with http.get(f"{base}{path}") as resp:
                            await resp.read()
                            assert resp.status == 200, (path, resp.status)
                        times.append((time.perf_counter() - t0) * 1000)
                    times.sort()
                    p90 = times[int(len(times) * 0.9) - 1]
                    print(
                        f"{name:<26} p50 {statistics.median(times):6.1f} ms  p90 {p90:6.1f} ms  max {times[-1]:6.1f} ms"
                    )
        finally:
            await server.close()
            await db.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=100)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    asyncio.run(main(args.threads, args.messages, args.rounds))
