"""A run suspended before a call that may wait for a human, as JSON and back.

The agent loop hands :class:`Suspended` to its ``checkpoint`` callback before such a call; the
turn runner stores it (:func:`gateway.store.interactions.save_checkpoint`), and after a restart
the batch's run resumes from it: the transcript as it was, the calls of the last model response
still to run, and what the run had used so far. The model is not called again for them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gateway.runtime.model import ChatMessage, ImageBlock, ToolCall, Usage

__all__ = ["Checkpoint", "Suspended", "from_state", "to_state"]


@dataclass(slots=True)
class Suspended:
    history: list[ChatMessage]
    calls: tuple[ToolCall, ...]  # the first may wait; the rest follow it
    usage: Usage
    model_calls: int
    tool_calls: list[str]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Which calls may wait for a human, and where the run's state goes before one."""

    may_wait: Callable[[ToolCall], bool]
    save: Callable[[Suspended], Awaitable[None]]


def _call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def _message(m: ChatMessage) -> dict[str, Any]:
    data: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        data["tool_calls"] = [_call(c) for c in m.tool_calls]
    if m.tool_call_id is not None:
        data["tool_call_id"] = m.tool_call_id
    if m.is_error:
        data["is_error"] = True
    if m.images:
        data["images"] = [{"media_type": i.media_type, "data": i.data} for i in m.images]
    return data


def to_state(s: Suspended) -> dict[str, Any]:
    return {
        "history": [_message(m) for m in s.history],
        "calls": [_call(c) for c in s.calls],
        "usage": [
            s.usage.input_tokens,
            s.usage.output_tokens,
            s.usage.cache_read_tokens,
            s.usage.cache_write_tokens,
        ],
        "model_calls": s.model_calls,
        "tool_calls": list(s.tool_calls),
    }


def _tool_call(data: dict[str, Any]) -> ToolCall:
    return ToolCall(str(data["id"]), str(data["name"]), dict(data["arguments"]))


def from_state(state: dict[str, Any]) -> Suspended:
    history = [
        ChatMessage(
            m["role"],
            m.get("content", ""),
            tool_calls=tuple(_tool_call(c) for c in m.get("tool_calls", ())),
            tool_call_id=m.get("tool_call_id"),
            is_error=bool(m.get("is_error")),
            images=tuple(ImageBlock(i["media_type"], i["data"]) for i in m.get("images", ())),
        )
        for m in state["history"]
    ]
    return Suspended(
        history=history,
        calls=tuple(_tool_call(c) for c in state["calls"]),
        usage=Usage(*state.get("usage", (0, 0, 0, 0))),
        model_calls=int(state.get("model_calls", 0)),
        tool_calls=list(state.get("tool_calls", ())),
    )
