"""A model stand-in for a compose graph, in a process of its own, counting calls per node.

The chat message ``compose`` makes the parent call ``compose`` with nodes ``a`` and ``b``
(independent) and ``c`` (after both); once the tool answered, the parent replies
``composed: <result JSON>``. A node's request (first user message ``NODE <id> ...``) is
answered ``<id> done`` at once, except ``c``'s first request, which waits ``--hold`` seconds
(long enough to kill the daemon mid-graph). After every request the counts per node are
written to ``--counts`` as JSON.

    python -m tests.fakes.compose_model --port-file PATH --counts PATH [--hold S] [--max-seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, FakeAnthropic, Reply, _write_atomically, serve_until_stopped
from tests.fakes.model_script import Step, last_user_text

GRAPH = {
    "nodes": [
        {"id": "a", "prompt": "NODE a list the modules"},
        {"id": "b", "prompt": "NODE b list the tests"},
        {"id": "c", "prompt": "NODE c match them"},
    ],
    "edges": [{"from": "a", "to": "c"}, {"from": "b", "to": "c"}],
}


def _first_user(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "".join(b.get("text", "") for b in content if b.get("type") == "text")
    return ""


def _results(body: dict[str, Any]) -> list[str]:
    found = []
    for message in body.get("messages", []):
        for block in message["content"] if isinstance(message.get("content"), list) else []:
            if block.get("type") == "tool_result":
                content = block.get("content", "")
                found.append(
                    content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
                )
    return found


def responder(counts: Counter[str], counts_file: Path, hold: float):
    def respond(body: dict[str, Any]) -> Step:
        first = _first_user(body)
        if first.startswith("NODE "):
            node = first.split()[1]
            counts[node] += 1
            _write_atomically(counts_file, json.dumps(counts))
            delay = hold if node == "c" and counts[node] == 1 else 0.0
            return Reply(text=f"{node} done", delay=delay)
        counts["parent"] += 1
        _write_atomically(counts_file, json.dumps(counts))
        results = _results(body)
        if results:
            return Reply(text="composed: " + results[-1])
        if last_user_text(body).strip() == "compose":
            return Reply(tool_calls=[Call("compose", GRAPH)])
        return Reply(text="?")

    return respond


async def serve(port_file: Path, counts_file: Path, hold: float, max_seconds: float) -> None:
    counts: Counter[str] = Counter()
    await serve_until_stopped(
        FakeAnthropic(responder=responder(counts, counts_file, hold)), port_file, max_seconds
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="A model stand-in for a compose graph, counting node calls.")
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--counts", type=Path, required=True)
    parser.add_argument("--hold", type=float, default=60.0, help="seconds node c's first request waits")
    parser.add_argument("--max-seconds", type=float, default=600.0)
    args = parser.parse_args()
    asyncio.run(serve(args.port_file, args.counts, args.hold, args.max_seconds))


if __name__ == "__main__":
    main()
