"""A tap to the resumed turn's next model call, in process: a console gateway on a real database,
the fake model asking ``ask_question`` (confirm) in a fresh thread each round; the clock runs from
the answer's submission (intake, the answer's commit, the waiting turn woken, the tool result,
the agent loop, the SDK request) until the model stand-in, in this process, receives the next
request. The SDK's own request over loopback is inside the figure, so it bounds Talon's overhead.

python -m bench.bench_interactions [--runs 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, tool_results, write_config

ASK = Call("ask_question", {"question": "Go?", "type": "confirm"})


def _pct(times: list[float], p: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


async def main(runs: int) -> None:
    resumed: asyncio.Queue[float] = asyncio.Queue()

    def respond(body: dict[str, Any]) -> Reply:
        if tool_results(body):
            resumed.put_nowait(time.perf_counter())
            return Reply(text="done")
        return Reply(tool_calls=[ASK])

    with tempfile.TemporaryDirectory() as tmp:
        async with FakeAnthropic(responder=respond) as fake:
            config = write_config(
                Path(tmp), provider=provider_for(fake), personas={"assistant": {"capabilities": ["chat.ask"]}}
            )
            async with running_gateway(config) as gw:
                console = gw.components.control.console(None)
                service = gw.components.interactions
                times: list[float] = []
                for i in range(runs + 5):
                    thread = f"t{i}"
                    await console.submit(thread, "go?")
                    key = console.thread_key(thread)
                    while not service._open.get(key):
                        await asyncio.sleep(0.002)
                    await asyncio.sleep(0.01)  # the prompt is posted and the turn parked
                    started = time.perf_counter()
                    await console.submit(thread, "yes")
                    reached = await asyncio.wait_for(resumed.get(), 10)
                    if i >= 5:  # the first rounds warm up the SDK and the database
                        times.append((reached - started) * 1000)
    print(
        f"tap -> next model call: p50 {statistics.median(times):.2f} ms, p95 {_pct(times, 0.95):.2f} ms "
        f"({runs} taps)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    asyncio.run(main(parser.parse_args().runs))
