"""A model stand-in that asks the chat, in a process of its own, counting what it was asked.

The chat message ``ask`` makes it call ``ask_question`` (confirm); ``gate`` makes it call
``state_put`` (a persona may gate it behind an approval). Once the tool answered, it replies
``answered: <tool result>``. After every request the counts are written to ``--counts`` as JSON:
``ask`` and ``gate`` count the requests that made it call the tool, ``resumed`` those that
carried the tool's result.

    python -m tests.fakes.asking_model --port-file PATH --counts PATH [--max-seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

from tests.fakes.compose_model import _results
from tests.fakes.model_api import Call, FakeAnthropic, Reply, _write_atomically, serve_until_stopped
from tests.fakes.model_script import Step, last_user_text

CALLS = {
    "ask": Call("ask_question", {"question": "Ship it?", "type": "confirm"}),
    "gate": Call("state_put", {"namespace": "ops", "key": "deploy", "value": {"go": True}}),
}


def responder(counts: Counter[str], counts_file: Path):  # type: ignore[no-untyped-def]
    def respond(body: dict[str, Any]) -> Step:
        results = _results(body)
        word = last_user_text(body).strip()
        if results:
            counts["resumed"] += 1
            reply: Step = Reply(text="answered: " + results[-1])
        elif word in CALLS:
            counts[word] += 1
            reply = Reply(tool_calls=[CALLS[word]])
        else:
            reply = Reply(text="?")
        _write_atomically(counts_file, json.dumps(counts))
        return reply

    return respond


async def serve(port_file: Path, counts_file: Path, max_seconds: float) -> None:
    counts: Counter[str] = Counter()
    await serve_until_stopped(FakeAnthropic(responder=responder(counts, counts_file)), port_file, max_seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description="A model stand-in that asks the chat, counting its calls.")
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--counts", type=Path, required=True)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    args = parser.parse_args()
    asyncio.run(serve(args.port_file, args.counts, args.max_seconds))


if __name__ == "__main__":
    main()
