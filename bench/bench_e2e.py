"""End to end through the gateway with a model that answers instantly.

Console threads, each a closed loop (send, wait for the reply, send again), through the
real pipeline, queue, turn runner, outbox and console channel: 200 threads flat out
(replies/s), the same 200 threads paced at 300 messages/s, and 4 threads. Reports
replies/s and the gateway overhead per message: event committed -> reply handed to the
channel (the instant model's own time is a few microseconds).

With ``--traces`` every message is also traced with OpenTelemetry (intake, turn, model and
send spans) and exported to the OTLP collector stand-in, which runs in a process of its own.

With ``--http`` each run is made four times, without, with, with and without the HTTP server
(``http:`` on 127.0.0.1 with ``/metrics``, scraped once a second by another process while
the run lasts), and the means of each side and their ratio are printed.

    python -m bench.bench_e2e [--threads 200] [--messages 10] [--rate 300] [--traces] [--http]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from connectors.base import OutboundChunk, SendResult
from gateway import otel
from gateway.heap import settle_heap
from gateway.runtime.model import ModelRequest, ModelResponse, TextDelta, Usage
from gateway.traces_settings import TracesSettings
from tests.harness import running_gateway, write_config


class InstantModel:
    name = "instant"

    async def complete(self, request: ModelRequest, on_text: TextDelta | None = None) -> ModelResponse:
        return ModelResponse(text=f"ok: {request.messages[-1].content[:40]}", usage=Usage(10, 3))

    async def aclose(self) -> None:
        return None


async def run(
    threads: int, messages: int, rate: float | None = None, *, http: bool = False, database: str | None = None
) -> dict[str, float]:
    """Each thread sends its next message once the reply to the last one arrived; with
    ``rate``, messages also start on a schedule of ``rate`` per second across all threads.
    With ``http``, the HTTP server serves ``/metrics`` and is scraped once a second; with
    ``database``, the store is that PostgreSQL database."""
    extra: dict[str, Any] = {"log_level": "warning"}
    if database:
        extra["database"] = {"url": database}
    if http:
        extra["http"] = {"listen": "127.0.0.1:0", "metrics": True}
    with tempfile.TemporaryDirectory() as tmp:
        config = write_config(
            Path(tmp),
            provider={"type": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "x"},
            extra=extra,
        )
        async with running_gateway(config) as gw, _scraper(Path(tmp) / "data" if http else None):
            await gw.warmed_up()  # SDK imports would steal the GIL mid-run
            settle_heap()  # as `talon run` does once warm
            gw.components.providers["fake"] = InstantModel()
            console = gw.components.control.console(None)
            assert console is not None
            handed: dict[str, asyncio.Future[float]] = {}
            original_send = console.send

            async def timed_send(item: OutboundChunk) -> SendResult:
                future = handed.get(item.thread.chat_id)
                if future and not future.done():
                    future.set_result(time.perf_counter())
                return await original_send(item)

            console.send = timed_send  # type: ignore[method-assign]
            overheads: list[float] = []

            async def conversation(t: int) -> None:
                for n in range(messages):
                    if rate:
                        delay = started + (n * threads + t) / rate - time.perf_counter()
                        if delay > 0:
                            await asyncio.sleep(delay)
                    loop = asyncio.get_running_loop()
                    handed[f"t{t}"] = loop.create_future()
                    await console.submit(f"t{t}", f"message {n}")
                    committed = time.perf_counter()
                    overheads.append(await handed[f"t{t}"] - committed)

            started, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(conversation(t) for t in range(threads)))
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    overheads.sort()
    return {
        "replies/s": threads * messages / elapsed,
        # The gateway's CPU per reply (the bench's own driving included, the scraper not):
        # steadier than replies/s when other work shares the machine.
        "cpu ms/reply": cpu / (threads * messages) * 1000,
        "p50 overhead ms": statistics.median(overheads) * 1000,
        "p99 overhead ms": overheads[int(len(overheads) * 0.99)] * 1000,
    }


_SCRAPE = """
import sys, time, urllib.request
while True:
    with urllib.request.urlopen(sys.argv[1], timeout=10) as resp:
        assert resp.status == 200, resp.status
        resp.read()
    time.sleep(1.0)
"""


@contextlib.asynccontextmanager
async def _scraper(data: Path | None) -> Any:
    """GETs /metrics once a second while the body runs, from a process of its own (as a
    Prometheus would: its parsing must not share the gateway's event loop)."""
    if data is None:
        yield
        return
    url = (data / "http.url").read_text().strip() + "/metrics"
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", _SCRAPE, url)
    try:
        yield
    finally:
        proc.kill()
        await proc.wait()


@contextlib.contextmanager
def collector_process() -> Iterator[str]:
    """The OTLP collector stand-in in a process of its own; yields its URL."""
    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "collector.port"
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.otlp_collector", "--port-file", str(port_file)],
            stdout=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 20
            while not port_file.exists():
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the collector stand-in did not start")
                time.sleep(0.05)
            yield port_file.read_text().strip()
        finally:
            proc.terminate()
            proc.wait(10)


async def traced_run(
    url: str | None, threads: int, messages: int, rate: float | None, http: bool = False
) -> dict[str, float]:
    if url is None:
        return await run(threads, messages, rate, http=http)
    otel.install(TracesSettings(otlp_endpoint=url))
    try:
        return await run(threads, messages, rate, http=http)
    finally:
        await otel.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=200)
    ap.add_argument("--messages", type=int, default=10, help="messages per thread")
    ap.add_argument("--rate", type=float, default=300.0, help="messages/s for the paced run")
    ap.add_argument("--light-threads", type=int, default=4, help="threads for the light-load run")
    ap.add_argument(
        "--traces", action="store_true", help="export OpenTelemetry spans to a collector stand-in"
    )
    ap.add_argument(
        "--http",
        action="store_true",
        help="run each case without and with the HTTP server (/metrics scraped every second), off-on-on-off",
    )
    ap.add_argument(
        "--postgres",
        action="store_true",
        help="run each case on SQLite and on a throwaway PostgreSQL server (tests/pg_server.py), "
        "sqlite-pg-pg-sqlite",
    )
    args = ap.parse_args()
    if args.postgres:
        _compare_engines(args)
        return
    # Saturation: every thread always has a message waiting, so overhead includes queueing.
    # Paced: the same threads at the target rate, so overhead is the gateway's path under load.
    # Light load: a few conversations, so overhead is the gateway's path alone.
    runs = [
        (args.threads, None, "saturation"),
        (args.threads, args.rate, f"paced at {args.rate:g} messages/s"),
        (args.light_threads, None, "light load"),
    ]
    with collector_process() if args.traces else contextlib.nullcontext() as url:
        for threads, rate, label in runs:
            traced = ", traces exported" if url else ""
            print(f"end to end, {label}: {threads} threads x {args.messages} messages, instant model{traced}")
            if not args.http:
                result = asyncio.run(traced_run(url, threads, args.messages, rate))
                for key, value in result.items():
                    print(f"  {key:>16}: {value:,.2f}")
                continue
            # off, on, on, off: a process's later runs are slower, so each side gets both places.
            pairs = [asyncio.run(traced_run(url, threads, args.messages, rate, http=h)) for h in (0, 1, 1, 0)]
            off = {k: (pairs[0][k] + pairs[3][k]) / 2 for k in pairs[0]}
            on = {k: (pairs[1][k] + pairs[2][k]) / 2 for k in pairs[0]}
            print(f"  {'':>16}  {'http off':>10}  {'http on':>10}  {'on/off':>7}")
            for key in off:
                print(f"  {key:>16}: {off[key]:>10,.2f}  {on[key]:>10,.2f}  {on[key] / off[key]:>7.3f}")


def _compare_engines(args: argparse.Namespace) -> None:
    from tests.pg_server import running_server

    with running_server() as server:
        if server is None:
            raise SystemExit("PostgreSQL is not installed (apt-get install postgresql)")
        for threads, rate, label in [
            (args.threads, None, "saturation"),
            (args.light_threads, None, "light load"),
        ]:
            print(f"end to end, {label}: {threads} threads x {args.messages} messages, instant model")
            # sqlite, pg, pg, sqlite: a process's later runs are slower, so each side gets both places.
            order = [None, server.new_database(), server.new_database(), None]
            results = [asyncio.run(run(threads, args.messages, rate, database=url)) for url in order]
            sqlite = {k: (results[0][k] + results[3][k]) / 2 for k in results[0]}
            pg = {k: (results[1][k] + results[2][k]) / 2 for k in results[0]}
            print(f"  {'':>16}  {'sqlite':>10}  {'postgresql':>10}  {'pg/sqlite':>9}")
            for key in sqlite:
                print(f"  {key:>16}: {sqlite[key]:>10,.2f}  {pg[key]:>10,.2f}  {pg[key] / sqlite[key]:>9.3f}")


if __name__ == "__main__":
    main()
