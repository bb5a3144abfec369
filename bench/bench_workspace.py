"""Workspace tools: ``bash`` running ``true`` (sandbox start included) and a 20-page PDF extracted.

python -m bench.bench_workspace [--runs 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from gateway.config import Settings
from gateway.documents import extract_bounded
from gateway.personas import Persona
from tests.fakes.pdf_maker import make_pdf
from tools.base import ToolContext
from tools.workspace.shell import run_bash


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "data").mkdir()
        persona = Persona(
            name="bench", provider="x", model="m", description=None,
            capabilities=("shell.exec:sandbox",), system_prompt="", path=root,
        )  # fmt: skip
        ctx = ToolContext(
            thread_id=1, persona=persona, db=None, settings=Settings(config_dir=root, data_dir=Path("data"))
        )  # type: ignore[arg-type]
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            result = await run_bash(ctx, {"command": "true"})
            times.append((time.perf_counter() - started) * 1000)
            assert result["exit_code"] == 0
        times.sort()
        print(
            f"bash true: p50 {statistics.median(times):.1f} ms, p90 {times[int(len(times) * 0.9)]:.1f} ms ({runs} runs)"
        )
    pdf = make_pdf([f"Page {i}: " + "lorem ipsum dolor sit amet " * 20 for i in range(20)])
    times = []
    for _ in range(10):
        started = time.perf_counter()
        found = await extract_bounded(pdf, "pdf")
        times.append((time.perf_counter() - started) * 1000)
        assert found.pages == 20
    print(f"extract 20-page pdf: p50 {statistics.median(times):.1f} ms, max {max(times):.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    asyncio.run(main(parser.parse_args().runs))
