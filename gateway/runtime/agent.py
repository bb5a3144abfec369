"""The agent loop: model -> tools -> model, up to a turn limit."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.runtime.model import (
    ChatMessage,
    ImageBlock,
    ModelProvider,
    ModelRequest,
    TextDelta,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)

log = logging.getLogger("talon.agent")


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    content: str
    is_error: bool = False
    images: tuple[ImageBlock, ...] = ()


class ToolBox(Protocol):
    """The tools of one turn: what the model may see and how a call is executed."""

    def specs(self) -> Sequence[ToolSpec]: ...

    async def call(self, call: ToolCall) -> ToolOutcome: ...


class NoTools:
    def specs(self) -> Sequence[ToolSpec]:
        return ()

    async def call(self, call: ToolCall) -> ToolOutcome:
        return ToolOutcome(f"unknown tool {call.name!r}; no tools are available", is_error=True)


@dataclass(slots=True)
class TurnResult:
    text: str
    usage: Usage = field(default_factory=Usage)
    model_calls: int = 0
    tool_calls: list[str] = field(default_factory=list)


async def run_agent(
    provider: ModelProvider,
    *,
    model: str,
    system: str,
    messages: Sequence[ChatMessage],
    tools: ToolBox,
    max_turns: int,
    max_tokens: int,
    call_timeout: float,
    on_text: TextDelta | None = None,
) -> TurnResult:
    """Loop until the model answers without tool calls or ``max_turns`` model calls pass."""
    history = list(messages)
    specs = tuple(tools.specs())
    result = TurnResult(text="")
    for _ in range(max_turns):
        response = await provider.complete(
            ModelRequest(model, system, tuple(history), specs, max_tokens, call_timeout), on_text
        )
        result.model_calls += 1
        result.usage = result.usage + response.usage
        if not response.tool_calls:
            result.text = response.text.strip()
            return result
        history.append(ChatMessage("assistant", response.text, tool_calls=response.tool_calls))
        for call in response.tool_calls:
            outcome = await tools.call(call)
            result.tool_calls.append(call.name)
            history.append(
                ChatMessage(
                    "tool",
                    outcome.content,
                    tool_call_id=call.id,
                    is_error=outcome.is_error,
                    images=outcome.images,
                )
            )
    log.warning("turn stopped after %d model calls without a final answer", max_turns)
    result.text = f"I stopped after {max_turns} steps without finishing. Ask me to continue if you want me to keep going."
    return result


def tool_result_text(value: Any) -> str:
    """Tool results reach the model as JSON text (a :class:`ToolResult`: its ``value``)."""
    if isinstance(value, ToolResult):
        value = value.value
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def tool_result_images(value: Any) -> tuple[ImageBlock, ...]:
    """The images a tool result carries besides its text (only a :class:`ToolResult` has any)."""
    return value.images if isinstance(value, ToolResult) else ()
