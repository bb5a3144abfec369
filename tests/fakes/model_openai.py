"""OpenAI Chat Completions wire format for the stand-in server: validation, bodies, SSE chunks."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from tests.fakes.model_script import Call, Error, Reply, estimate_tokens, json_bytes

ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}

FINISH_REASONS = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def error_body(error: Error) -> dict[str, Any]:
    kind, code = ERROR_TYPES.get(error.status, ("server_error", None))
    message = error.message or f"scripted error {error.status}"
    return {"error": {"message": message, "type": error.type or kind, "param": None, "code": code}}


def invalid_request(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": "messages", "code": None}}


def validate(body: dict[str, Any]) -> str | None:
    """The API's 400 message for an invalid request body, or ``None`` when it is valid."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must contain at least one message"
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not function.get("name"):
            return "tools: each tool needs type 'function' and a function.name"
    pending: set[str] = set()  # tool_call ids still waiting for their tool message
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"messages[{i}].role: invalid value {role!r}"
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                return (
                    f"Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                    f"message with 'tool_calls' (messages[{i}])."
                )
            pending.discard(message["tool_call_id"])
            if not _text_only(message.get("content")):
                return f"messages[{i}].content: a 'tool' message takes text only (a string or text parts)"
            continue
        if pending:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages responding to "
                f"each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                f"{', '.join(sorted(pending))}"
            )
        if role == "user" and not isinstance(message.get("content"), str):
            problem = _user_parts_problem(message.get("content"), i)
            if problem:
                return problem
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                arguments = (call.get("function") or {}).get("arguments")
                if not isinstance(arguments, str):
                    return f"messages[{i}].tool_calls: function.arguments must be a string"
                pending.add(str(call.get("id")))
            if message.get("content") is None and not message.get("tool_calls"):
                return f"messages[{i}]: an assistant message needs content or tool_calls"
    return None


def _text_only(content: Any) -> bool:
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content)


def _user_parts_problem(content: Any, i: int) -> str | None:
    """The API's complaint about a user message's content parts (text and image_url)."""
    if not isinstance(content, list) or not content:
        return f"messages[{i}].content: must be a string or a non-empty array of content parts"
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            continue
        url = (part.get("image_url") or {}).get("url") if kind == "image_url" else None
        if not isinstance(url, str) or not url.startswith(("data:image/", "http://", "https://")):
            return f"messages[{i}].content[{k}]: invalid content part (type {kind!r})"
    return None


def _call_id(call: Call) -> str:
    return call.id or f"call_{uuid.uuid4().hex[:24]}"


def _arguments_json(call: Call) -> str:
    # Models write arguments as UTF-8 text, not \u escapes.
    return (
        call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments, ensure_ascii=False)
    )


def _usage(reply: Reply, body: dict[str, Any]) -> dict[str, int]:
    inputs = reply.input_tokens
    if inputs is None:
        inputs = estimate_tokens(json.dumps(body.get("messages", [])))
    outputs = reply.output_tokens
    if outputs is None:
        outputs = estimate_tokens(reply.full_text + "".join(_arguments_json(c) for c in reply.tool_calls))
    return {"prompt_tokens": inputs, "completion_tokens": outputs, "total_tokens": inputs + outputs}


def _finish_reason(reply: Reply) -> str:
    if reply.stop_reason:
        return FINISH_REASONS.get(reply.stop_reason, reply.stop_reason)
    return "tool_calls" if reply.tool_calls else "stop"


def completion_json(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    """A non-streaming Chat Completions response."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.full_text or None, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": _call_id(c),
                "type": "function",
                "function": {"name": c.name, "arguments": _arguments_json(c)},
            }
            for c in reply.tool_calls
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(reply)}
        ],
        "usage": _usage(reply, body),
    }


def stream_chunks(reply: Reply, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``data:`` chunks of a streamed reply, in order (``[DONE]`` not included)."""
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "system_fingerprint": None,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        out = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if include_usage:
            out["usage"] = None
        return out

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks.extend(chunk({"content": d}) for d in reply.deltas())
    for index, call in enumerate(reply.tool_calls):
        first = {
            "index": index,
            "id": _call_id(call),
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        chunks.append(chunk({"tool_calls": [first]}))
        for piece in reply.argument_deltas(_arguments_json(call)):
            part = {"index": index, "function": {"arguments": piece}}
            chunks.append(chunk({"tool_calls": [part]}))
    chunks.append(chunk({}, _finish_reason(reply)))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": _usage(reply, body)})
    return chunks


def error_stream_chunks(error: Error, body: dict[str, Any]) -> list[dict[str, Any]]:
    """A stream that starts and then carries an error object, as compatible servers do."""
    start = stream_chunks(Reply(), body)[:1]
    return [*start, error_body(error)]


def encode_chunk(data: dict[str, Any] | str, *, raw_utf8: bool = False) -> bytes:
    payload = data.encode() if isinstance(data, str) else json_bytes(data, raw_utf8=raw_utf8)
    return b"data: " + payload + b"\n\n"


BROKEN_STREAM = b'data: {"id": "chatcmpl-broken", "choices": [{"index": 0, "delta": {"content": \n\n'
