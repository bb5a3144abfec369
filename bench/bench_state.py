"""Versioned state in process: state_cas through its tool handler on a real database (each call
one compare-and-swap transaction that matches), and state_get beside it.

python -m bench.bench_state [--runs 2000]
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
from gateway.store.db import open_database
from tools.base import ToolContext
from tools.state import reading, writing


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
                capabilities=("state.read:team", "state.write:team"), system_prompt="", path=root,
            )  # fmt: skip
            ctx = ToolContext(thread_id=1, persona=persona, db=db, settings=Settings(config_dir=root))
            doc = {"namespace": "bench", "key": "counter", "scope": "team"}
            value = {"count": 0, "owner": "bench", "items": ["a", "b", "c"]}
            for i in range(200):  # other documents of the owner, and warm-up
                await writing.PUT.handler(ctx, {**doc, "key": f"other.{i}", "value": value})
            version, times = 0, []
            for i in range(runs):
                started = time.perf_counter()
                result = await writing.CAS.handler(
                    ctx, {**doc, "expected_version": version, "value": {**value, "count": i}}
                )
                times.append((time.perf_counter() - started) * 1000)
                assert result["matched"], result
                version = result["version"]
            print(
                f"state_cas: p50 {statistics.median(times):.3f} ms, p90 {_pct(times, 0.9):.3f} ms ({runs} runs)"
            )
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                got = await reading.GET.handler(ctx, doc)
                times.append((time.perf_counter() - started) * 1000)
            assert got is not None and got["version"] == runs
            print(
                f"state_get: p50 {statistics.median(times):.3f} ms, p90 {_pct(times, 0.9):.3f} ms ({runs} runs)"
            )
        finally:
            await db.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2000)
    asyncio.run(main(parser.parse_args().runs))
