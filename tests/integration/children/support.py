"""Scripting a parent turn and its child agents on one model stand-in.

A child's first user message is its prompt, so each request is routed by the first user
message of its transcript: the chat text for the parent, the task for a child.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.fakes.model_api import Call, Reply
from tests.harness import tool_results

Responder = Callable[[dict[str, Any]], Reply]


def first_user(body: dict[str, Any]) -> str:
    """The text of the first user message of an Anthropic request body."""
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        return "".join(b.get("text", "") for b in content if b.get("type") == "text")
    return ""


def routed(**by_prefix: Responder) -> Responder:
    """Answer each request with the responder whose key starts its first user message
    (keys use ``_`` for a space); anything else gets ``?``."""

    def respond(body: dict[str, Any]) -> Reply:
        first = first_user(body)
        for prefix, responder in by_prefix.items():
            if first.startswith(prefix.replace("_", " ")):
                return responder(body)
        return Reply(text="?")

    return respond


def calls_then(*calls: Call, final: Callable[[list[tuple[bool, str]]], str]) -> Responder:
    """One tool call per request while ``calls`` last, then ``final(tool results)``."""

    def respond(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if len(results) < len(calls):
            return Reply(tool_calls=[calls[len(results)]])
        return Reply(text=final(results))

    return respond


def last_result(results: list[tuple[bool, str]]) -> str:
    error, text = results[-1]
    return ("ERROR " if error else "OK ") + text


def tool_names(body: dict[str, Any]) -> set[str]:
    return {t["name"] for t in body.get("tools", [])}


def of(requests: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    """The requests whose first user message starts with ``prefix``."""
    return [r for r in requests if first_user(r).startswith(prefix)]


def parsed(text: str) -> Any:
    """The JSON of a tool result passed on as ``OK {...}``."""
    return json.loads(text.split(" ", 1)[1])
