"""A model stand-in whose persona delegates once, in a process of its own.

A chat message makes the parent call ``agent`` with the prompt ``CHILD <the message>``; the
child answers ``child read: <its prompt>``; given that tool result the parent replies
``done: <the child's answer>``. So the chat text travels through the tool's arguments, its result
and the reply — what a trace must not carry unless content is on.

    python -m tests.fakes.delegating_model --port-file PATH [--max-seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, FakeAnthropic, Reply, serve_until_stopped
from tests.fakes.model_script import last_user_text


def _first_user(body: dict[str, Any]) -> str:
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "".join(b.get("text", "") for b in content if b.get("type") == "text")
    return ""


def _result(body: dict[str, Any]) -> str | None:
    for message in reversed(body.get("messages", [])):
        for block in message["content"] if isinstance(message.get("content"), list) else []:
            if block.get("type") == "tool_result":
                content = block.get("content", "")
                return content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
    return None


def respond(body: dict[str, Any]) -> Reply:
    first = _first_user(body)
    if first.startswith("CHILD "):
        return Reply(text=f"child read: {first.removeprefix('CHILD ')}", input_tokens=9, output_tokens=4)
    result = _result(body)
    if result is not None:  # agent's result is JSON: {"result": <the child's answer>, ...}
        return Reply(text=f"done: {json.loads(result)['result']}")
    return Reply(tool_calls=[Call("agent", {"prompt": f"CHILD {last_user_text(body)}"})])


def main() -> None:
    parser = argparse.ArgumentParser(description="A model stand-in that delegates once to a child agent.")
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    args = parser.parse_args()
    asyncio.run(serve_until_stopped(FakeAnthropic(responder=respond), args.port_file, args.max_seconds))


if __name__ == "__main__":
    main()
