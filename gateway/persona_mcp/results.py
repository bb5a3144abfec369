"""MCP tool results -> the text a model reads."""

from __future__ import annotations

import base64
import binascii
import json

import mcp_types as types

from gateway.runtime.agent import ToolOutcome

__all__ = ["MAX_RESULT_CHARS", "outcome_from_result"]

# A server can return anything; the model's context cannot hold anything.
MAX_RESULT_CHARS = 100_000


def outcome_from_result(result: types.CallToolResult) -> ToolOutcome:
    """Join the text parts, summarize the rest, keep ``isError``."""
    parts = [_describe(block) for block in result.content]
    text = "\n".join(p for p in parts if p)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, default=str)
    if not text:
        text = "(the tool returned nothing)"
    if len(text) > MAX_RESULT_CHARS:
        dropped = len(text) - MAX_RESULT_CHARS
        text = f"{text[:MAX_RESULT_CHARS]}\n[… {dropped} more characters cut]"
    return ToolOutcome(text, is_error=bool(result.is_error))


def _describe(block: object) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent):
        return f"[image: {block.mime_type}, {_size(block.data)}]"
    if isinstance(block, types.AudioContent):
        return f"[audio: {block.mime_type}, {_size(block.data)}]"
    if isinstance(block, types.ResourceLink):
        label = f" ({block.name})" if block.name else ""
        return f"[resource link: {block.uri}{label}]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        mime = f"{resource.mime_type}, " if resource.mime_type else ""
        blob = getattr(resource, "blob", "")
        return f"[resource {resource.uri}: {mime}{_size(blob)}]"
    kind = getattr(block, "type", type(block).__name__)
    return f"[{kind} content]"


def _size(data: str) -> str:
    try:
        return f"{len(base64.b64decode(data, validate=False))} bytes"
    except (binascii.Error, ValueError):
        return f"{len(data)} base64 characters"
