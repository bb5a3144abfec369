"""Anthropic Messages API wire format for the stand-in server: validation, bodies, SSE events."""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.fakes.model_script import Call, Error, Reply, estimate_tokens, json_bytes

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def error_type(error: Error) -> str:
    return error.type or ERROR_TYPES.get(error.status, "api_error")


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def validate(body: dict[str, Any]) -> str | None:
    """The API's 400 message for an invalid request body, or ``None`` when it is valid."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    for tool in body.get("tools") or []:
        if (
            not isinstance(tool, dict)
            or not tool.get("name")
            or not isinstance(tool.get("input_schema"), dict)
        ):
            return "tools: each tool needs a name and an input_schema object"
    pending: set[str] = set()  # tool_use ids the next user message must answer
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        blocks = _blocks(message.get("content"))
        if blocks is None:
            return f"messages.{i}.content: Input should be a string or a list of content blocks"
        answered: set[str] = set()
        uses: set[str] = set()
        for j, block in enumerate(blocks):
            kind = block.get("type")
            if kind == "text" and not str(block.get("text", "")).strip():
                return f"messages.{i}.content.{j}.text: text content blocks must contain non-whitespace text"
            if kind == "tool_result":
                if role != "user":
                    return f"messages.{i}.content.{j}: tool_result blocks are only allowed in user messages"
                if block.get("tool_use_id") not in pending:
                    return (
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                        "`tool_use` block in the previous message."
                    )
                answered.add(block["tool_use_id"])
                problem = _result_content_problem(block.get("content"), f"messages.{i}.content.{j}.content")
                if problem:
                    return problem
            if kind == "tool_use":
                if role != "assistant":
                    return f"messages.{i}.content.{j}: tool_use blocks are only allowed in assistant messages"
                if not isinstance(block.get("input"), dict):
                    return f"messages.{i}.content.{j}.input: Input should be an object"
                uses.add(str(block.get("id")))
        if pending and role == "user" and pending - answered:
            return (
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(sorted(pending - answered))}"
            )
        pending = uses
    return None


_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def _result_content_problem(content: Any, where: str) -> str | None:
    """The API's complaint about a tool_result's content (a string, or text and image blocks)."""
    if content is None or isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"{where}: Input should be a valid string or list"
    for k, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            continue
        source = block.get("source") if kind == "image" else None
        if not isinstance(source, dict) or source.get("type") != "base64":
            return f"{where}.{k}: Input tag {kind!r} does not match the expected tags 'text', 'image'"
        if source.get("media_type") not in _IMAGE_TYPES:
            return f"{where}.{k}.source.media_type: Input should be {', '.join(_IMAGE_TYPES)}"
        if not isinstance(source.get("data"), str) or not source["data"]:
            return f"{where}.{k}.source.data: the image data must be a non-empty base64 string"
    return None


def _blocks(content: Any) -> list[dict[str, Any]] | None:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list) and all(isinstance(b, dict) for b in content):
        return content
    return None


def _tool_id(call: Call) -> str:
    return call.id or f"toolu_{uuid.uuid4().hex[:20]}"


def _arguments_json(call: Call) -> str:
    # Models write arguments as UTF-8 text, not \u escapes.
    return (
        call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments, ensure_ascii=False)
    )


def _usage(reply: Reply, body: dict[str, Any]) -> tuple[int, int]:
    inputs = reply.input_tokens
    if inputs is None:
        inputs = estimate_tokens(json.dumps(body.get("messages", [])) + str(body.get("system", "")))
    outputs = reply.output_tokens
    if outputs is None:
        outputs = estimate_tokens(reply.full_text + "".join(_arguments_json(c) for c in reply.tool_calls))
    return inputs, outputs


def _stop_reason(reply: Reply) -> str:
    return reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")


def message_json(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    """A non-streaming Messages API response."""
    content: list[dict[str, Any]] = []
    if reply.full_text:
        content.append({"type": "text", "text": reply.full_text})
    for call in reply.tool_calls:
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        content.append({"type": "tool_use", "id": _tool_id(call), "name": call.name, "input": arguments})
    inputs, outputs = _usage(reply, body)
    return {
        "id": f"msg_{uuid.uuid4().hex[:20]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": content,
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": {"input_tokens": inputs, "output_tokens": outputs},
    }


def _message_start(body: dict[str, Any], input_tokens: int) -> tuple[str, dict[str, Any]]:
    message = {
        "id": f"msg_{uuid.uuid4().hex[:20]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    }
    return "message_start", {"type": "message_start", "message": message}


def stream_events(reply: Reply, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events (name, data) of a streamed reply, in order."""
    inputs, outputs = _usage(reply, body)
    events = [_message_start(body, inputs), ("ping", {"type": "ping"})]
    index = 0
    deltas = reply.deltas()
    if deltas:
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        events.extend(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": d}},
            )
            for d in deltas
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for call in reply.tool_calls:
        block = {"type": "tool_use", "id": _tool_id(call), "name": call.name, "input": {}}
        events.append(
            ("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})
        )
        # Fragments cut mid-token, as the real API does.
        for piece in reply.argument_deltas(_arguments_json(call)):
            delta = {"type": "input_json_delta", "partial_json": piece}
            events.append(
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
                "usage": {"output_tokens": outputs},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def error_stream_events(error: Error, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A stream that starts and then fails with ``error`` (e.g. overloaded mid-stream)."""
    message = error.message or f"scripted error {error.status}"
    return [_message_start(body, 1), ("error", error_body(error_type(error), message))]


def encode_event(name: str, data: dict[str, Any], *, raw_utf8: bool = False) -> bytes:
    return f"event: {name}\ndata: ".encode() + json_bytes(data, raw_utf8=raw_utf8) + b"\n\n"


BROKEN_STREAM = b'event: message_start\ndata: {"type": "message_start", "message": {"id": \n\n'
