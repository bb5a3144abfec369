"""Skills and shared findings in process, on a real database: the skill tool loading an inline
skill (SKILL.md read and checked on each call), workspace_publish and workspace_query over a
tree of 450 entries, and the delivery check a subscribed child pays on every tool result.

python -m bench.bench_skills [--runs 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from gateway.config import Settings
from gateway.findings import delivery_block
from gateway.personas import Persona
from gateway.store.db import open_database
from gateway.store.findings import subscribe
from tools.base import ToolContext
from tools.findings import publish, query
from tools.skills import skill

SKILL_MD = (
    "---\nname: deploy-check\ndescription: check a deploy\n---\n\n" + "Check $ARGUMENTS step by step.\n" * 200
)


def _pct(times: list[float], p: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


async def _timed(name: str, runs: int, call: Callable[[int], Awaitable[Any]]) -> None:
    times = []
    for i in range(runs):
        started = time.perf_counter()
        await call(i)
        times.append((time.perf_counter() - started) * 1000)
    print(f"{name}: p50 {statistics.median(times):.3f} ms, p90 {_pct(times, 0.9):.3f} ms ({runs} runs)")


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "skills" / "deploy-check").mkdir(parents=True)
        (root / "skills" / "deploy-check" / "SKILL.md").write_text(SKILL_MD)
        (root / "skills" / "deploy-check" / "checklist.md").write_text("- health\n")
        db = await open_database(root / "talon.db")
        try:
            persona = Persona(
                name="bench", provider="x", model="m", description=None,
                capabilities=("skill.use", "workspace.share"), system_prompt="", path=root,
                skills=("deploy-check",), skill_descriptions=("check a deploy",),
            )  # fmt: skip
            settings = Settings(config_dir=root)
            ctx = ToolContext(thread_id=1, persona=persona, db=db, settings=settings, run_id=1)
            for i in range(450):  # a busy tree
                await publish.TOOL.handler(
                    ctx, {"type": "finding", "subject": f"area {i % 20}", "content": f"note {i}"}
                )
            await db.run_transaction(subscribe, 1, 2, subject="area 3", type=None, now=time.time())
            await _timed(
                "skill (inline, 6 KB SKILL.md)",
                runs,
                lambda i: skill.TOOL.handler(ctx, {"name": "deploy-check", "arguments": "v2"}),
            )
            await _timed(
                "workspace_query (2 words, 450 entries)",
                runs,
                lambda i: query.QUERY.handler(ctx, {"query": "area note"}),
            )
            await _timed("delivery check, nothing new", runs, lambda i: delivery_block(db, 2))
            await _timed(
                "workspace_publish",
                min(runs, 45),
                lambda i: publish.TOOL.handler(ctx, {"type": "status", "subject": "s", "content": f"n {i}"}),
            )
        finally:
            await db.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    asyncio.run(main(parser.parse_args().runs))
