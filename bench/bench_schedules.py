"""Schedules in process: create_schedule through its tool handler on a real database (each call
a new cron task with a fresh slug, among the persona's others), and the scheduler firing due
one-shot tasks (each occurrence one transaction: its history row, its queue item, its next run).

python -m bench.bench_schedules [--runs 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from gateway.config import Settings
from gateway.personas import Persona
from gateway.scheduler import Scheduler
from gateway.store import schedules
from gateway.store.db import open_database
from tests.unit.scheduler.support import add_thread
from tools.base import ToolContext
from tools.schedules import writing


def _pct(times: list[float], p: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        db = await open_database(root / "talon.db")
        try:
            persona = Persona(
                name="bench", provider="x", model="m", description=None,
                capabilities=("schedule.manage:own",), system_prompt="", path=root,
            )  # fmt: skip
            thread_id = await add_thread(db, "bench", persona="bench")
            ctx = ToolContext(thread_id=thread_id, persona=persona, db=db, settings=Settings(config_dir=root))
            times = []
            for i in range(runs):
                if i % 90 == 0:  # stay under the 100 enabled tasks a persona may have
                    for row in await db.read(schedules.persona_schedules, "bench"):
                        await db.run_transaction(
                            schedules.update_schedule,
                            row.id,
                            "bench",
                            {"enabled": 0, "next_run_at": None},
                            now=0.0,
                        )
                started = time.perf_counter()
                task = await writing.CREATE.handler(
                    ctx, {"name": "Nightly report", "command": "report", "cron": "0 2 * * *"}
                )
                times.append((time.perf_counter() - started) * 1000)
            assert task["taskId"] == f"nightly-report-{runs}", task["taskId"]
            print(
                f"create_schedule: p50 {statistics.median(times):.3f} ms, p90 {_pct(times, 0.9):.3f} ms ({runs} runs)"
            )

            now = time.time()
            for i in range(runs):
                await db.run_transaction(
                    schedules.create_schedule, persona="bench", thread_id=thread_id, label=None, cron_expr=None,
                    run_at=now - 1, timezone="UTC", prompt="go", prompt_file=None, next_run_at=now - 1,
                    now=now, task_id=f"due-{i}",
                )  # fmt: skip
            scheduler = Scheduler(db, default_timezone="UTC")
            started = time.perf_counter()
            fired = await scheduler.tick()
            elapsed = (time.perf_counter() - started) * 1000
            assert fired == runs, fired
            print(
                f"scheduler tick firing {runs} due one-shots: {elapsed:.0f} ms, {elapsed / runs:.3f} ms each"
            )
        finally:
            await db.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    asyncio.run(main(parser.parse_args().runs))
