"""File tools in process: read_file of a 10,000-line file (its last 2,000 lines, the default page) and grep over a 10,000-file workspace.

python -m bench.bench_file_tools [--runs 200]
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
from tools.base import ToolContext
from tools.workspace import grep, read_file
from tools.workspace.roots import WorkspaceRoots


def _ctx(root: Path) -> ToolContext:
    persona = Persona(
        name="bench", provider="x", model="m", description=None,
        capabilities=("fs.read:thread",), system_prompt="", path=root,
    )  # fmt: skip
    settings = Settings(config_dir=root, data_dir=Path("data"))
    return ToolContext(thread_id=1, persona=persona, db=None, settings=settings)  # type: ignore[arg-type]


def _pct(times: list[float], p: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "data").mkdir()
        ctx = _ctx(root)
        workspace = WorkspaceRoots.for_call(ctx, "read").roots[0].host
        (workspace / "big.txt").write_text(
            "".join(f"line {i}: some typical text of a log or a source file\n" for i in range(10_000))
        )
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            text = await read_file.TOOL.handler(ctx, {"file_path": "big.txt", "offset": 8001})
            times.append((time.perf_counter() - started) * 1000)
        assert " 10000\tline 9999" in text and "end of file" in text  # pages 1-8000 skipped, 2000 shown
        print(
            f"read_file 10,000 lines: p50 {statistics.median(times):.2f} ms, p90 {_pct(times, 0.9):.2f} ms ({runs} runs)"
        )
        tree = workspace / "tree"
        for i in range(10_000):
            folder = tree / f"d{i // 100:03d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"f{i:05d}.py").write_text(
                f"def f{i}():\n    return {i}\n" + ("NEEDLE\n" if i % 1000 == 0 else "")
            )
        times = []
        for _ in range(max(5, runs // 20)):
            started = time.perf_counter()
            out = await grep.TOOL.handler(ctx, {"pattern": "NEEDLE", "path": "/workspace/tree"})
            times.append((time.perf_counter() - started) * 1000)
        assert out.count("NEEDLE") == 10, out
        print(f"grep over 10,000 files: p50 {statistics.median(times):.1f} ms, max {max(times):.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    asyncio.run(main(parser.parse_args().runs))
