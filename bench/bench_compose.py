"""compose of 20 nodes with an instant model: Talon's overhead, in process.

The graph is five layers of four nodes (each node depends on every node of the layer before,
so nodes run four at a time, the default cap, and every downstream prompt carries four
upstream blocks). Each node is a real child: its runs row and child_runs row, a bridge
identity with its narrowed labels, its system prompt, the agent loop against an in-process
model that answers at once, its run completed and its node recorded. The call goes through
the bridge (argument check, label decision, audit) as a model's would. With an instant model
all of the time is Talon's.

python -m bench.bench_compose [--runs 50]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connectors.base import ThreadKey
from gateway.children.service import Children
from gateway.config import Settings
from gateway.host_tools import HostTools
from gateway.personas import Persona
from gateway.pipeline import Bindings
from gateway.runtime.model import ModelRequest, ModelResponse, TextDelta, Usage
from gateway.store.db import open_database
from gateway.store.runs import start_run
from gateway.store.threads import upsert_thread

LAYERS, WIDTH = 5, 4


class _InstantModel:
    name = "instant"

    async def complete(self, request: ModelRequest, on_text: TextDelta | None = None) -> ModelResponse:
        return ModelResponse("node output of a modest size", (), "end_turn", Usage(400, 12))

    async def aclose(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class _Services:
    children: Children
    delegation: Any = None
    subagents: Any = None
    poster: Any = None


def _graph(run: int) -> dict[str, Any]:
    ids = [[f"l{layer}n{i}" for i in range(WIDTH)] for layer in range(LAYERS)]
    nodes = [{"id": node, "prompt": f"run {run}: do part {node}"} for layer in ids for node in layer]
    edges = [{"from": a, "to": b} for up, down in itertools.pairwise(ids) for a in up for b in down]
    return {"nodes": nodes, "edges": edges}


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        settings = Settings(
            config_dir=root, data_dir=root / "data", providers={"instant": {"type": "openai"}}
        )
        settings.data_path.mkdir(parents=True)
        db = await open_database(root / "talon.db")
        persona = Persona(
            name="bench", provider="instant", model="m", description=None,
            capabilities=("agent.dispatch", "git.read"), system_prompt="# Bench", path=root,
        )  # fmt: skip
        personas = {"bench": persona}
        children = Children(db=db, settings=settings, providers={"instant": _InstantModel()}, delegation=None)  # type: ignore[arg-type]
        tools = HostTools(
            db=db,
            settings=settings,
            personas=personas,
            bindings=Bindings([], personas),
            services=_Services(children),  # type: ignore[arg-type]
        )
        children.attach(tools)
        try:
            thread = await db.run_transaction(
                upsert_thread, ThreadKey("console", "bench"), chat_type="dm", persona="bench", now=time.time()
            )
            times = []
            for run in range(runs + 3):  # three warm-up calls
                run_id = await db.run_transaction(start_run, thread.id, "bench", "instant:m", time.time())
                identity = tools.bridge.register(run_id, thread.id, "bench")
                started = time.perf_counter()
                result = await tools.bridge.call(identity, "compose", _graph(run))
                elapsed = (time.perf_counter() - started) * 1000
                tools.bridge.unregister(run_id)
                outcome = json.loads(result.content)
                assert not result.is_error and outcome["outcome"] == "completed", result.content[:500]
                if run >= 3:
                    times.append(elapsed)
            await tools.bridge.audit.flush()
        finally:
            await db.close()
    ordered = sorted(times)
    print(
        f"compose of {LAYERS * WIDTH} nodes, instant model: p50 {statistics.median(times):.1f} ms, "
        f"p90 {ordered[int(len(ordered) * 0.9)]:.1f} ms, max {ordered[-1]:.1f} ms ({runs} runs)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    asyncio.run(main(parser.parse_args().runs))
