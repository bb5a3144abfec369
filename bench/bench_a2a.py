"""persona_send round trip with instantly answering models (await_reply).

Alice's model calls ``persona_send(target_persona="bob", await_reply=true)``; Bob's model
answers at once. The time from Alice's tool call to its result is the delegation
overhead beyond the two model calls (which take microseconds here): the task row, Bob's
dedicated thread, the queue, Bob's turn and commit, and the wake-up of the waiting call.

    python -m bench.bench_a2a [--rounds 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from gateway.heap import settle_heap
from gateway.runtime.model import ModelRequest, ModelResponse, TextDelta, ToolCall, Usage
from tests.harness import running_gateway, say, write_config

PERSONAS = {
    "alice": {"capabilities": ["persona.send:*"], "system": "# Alice\n"},
    "bob": {"system": "# Bob\n"},
}


class InstantPersonas:
    """Alice delegates to Bob once per turn; Bob answers at once."""

    name = "instant"

    def __init__(self) -> None:
        self.sent_at: list[float] = []
        self.returned_at: list[float] = []

    async def complete(self, request: ModelRequest, on_text: TextDelta | None = None) -> ModelResponse:
        if request.system.startswith("# Bob"):
            return ModelResponse(text="bob's answer", usage=Usage(5, 2))
        if request.messages[-1].role == "tool":
            self.returned_at.append(time.perf_counter())
            return ModelResponse(text="done", usage=Usage(5, 1))
        self.sent_at.append(time.perf_counter())
        call = ToolCall("c1", "persona_send", {"target_persona": "bob", "message": "hi", "await_reply": True})
        return ModelResponse(text="", tool_calls=(call,), stop_reason="tool_use", usage=Usage(5, 5))

    async def aclose(self) -> None:
        return None


async def run(rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        config = write_config(
            Path(tmp),
            provider={"type": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "x"},
            personas=PERSONAS,
            extra={"bindings": [{"channel": "console", "persona": "alice"}], "log_level": "warning"},
        )
        async with running_gateway(config) as gw:
            await gw.warmed_up()  # SDK imports would steal the GIL mid-run
            settle_heap()  # as `talon run` does once warm
            model = InstantPersonas()
            gw.components.providers["fake"] = model
            for i in range(rounds):
                turn = await say(gw, f"round {i}", thread=f"t{i % 20}")
                assert turn.text == "done", turn.text
    overheads = sorted((b - a) * 1000 for a, b in zip(model.sent_at, model.returned_at, strict=True))
    return {
        "p50 overhead ms": statistics.median(overheads),
        "p99 overhead ms": overheads[int(len(overheads) * 0.99)],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    result = asyncio.run(run(args.rounds))
    print(f"persona_send await_reply round trip, {args.rounds} rounds, instant models")
    for key, value in result.items():
        print(f"  {key:>16}: {value:,.2f}")


if __name__ == "__main__":
    main()
