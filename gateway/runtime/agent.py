"""The agent loop: model -> tools -> model, up to a turn limit."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from gateway.metrics import MODEL_CALLS, MODEL_SECONDS
from gateway.runtime.checkpoints import Checkpoint, Suspended
from gateway.runtime.model import (
    ChatMessage,
    ImageBlock,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from gateway.tracing import NULL_TRACE, RunTrace

if TYPE_CHECKING:
    from gateway.budgets import BudgetLimit, RunBudget

log = logging.getLogger("talon.agent")


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    content: str
    is_error: bool = False
    images: tuple[ImageBlock, ...] = ()
    refused: bool = False  # the tool never ran (not permitted, bad arguments, unknown tool)
    error_class: str | None = None  # for traces: refused, invalid_arguments, timeout, tool_error, ...


class ToolBox(Protocol):
    """The tools of one turn: what the model may see and how a call is executed."""

    def specs(self) -> Sequence[ToolSpec]: ...

    async def call(self, call: ToolCall) -> ToolOutcome: ...


@runtime_checkable
class Steered(Protocol):
    """A toolbox whose run can be steered (a background child's): messages its parent sent,
    which the model reads as user messages at the next tool-call boundary."""

    async def steering(self, latest_text: str) -> Sequence[str]: ...


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
    model: str | None = None  # `provider:model` that answered last, when a chain of models ran
    fallbacks: int = 0  # model calls a fallback model answered


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
    trace: RunTrace = NULL_TRACE,
    budget: RunBudget | None = None,
    checkpoint: Checkpoint | None = None,
    resume: Suspended | None = None,
) -> TurnResult:
    """Loop until the model answers without tool calls or ``max_turns`` model calls pass.

    Before a call that may wait for a human, ``checkpoint`` gets the run's state; ``resume``
    (such a state, after a restart) continues the run there without calling the model again.

    Every model and tool call is recorded in ``trace``. When a budget of ``budget`` runs out,
    the run winds down: one last model call, told which budget ran out, whose tool calls are
    not run, and a reply that ends with the reason.
    """
    history = list(messages)
    specs = tuple(tools.specs())
    result = TurnResult(text="")
    if resume is not None:
        history = list(resume.history)
        result = TurnResult("", resume.usage, resume.model_calls, list(resume.tool_calls))
        await _run_calls(tools, resume.calls, history, result, trace, checkpoint)
    for _ in range(max_turns - result.model_calls):
        request = ModelRequest(model, system, tuple(history), specs, max_tokens, call_timeout)
        spent = budget.exhausted() if budget is not None else None
        if budget is not None and spent is not None:
            return await _wind_down(provider, request, on_text, trace, budget, spent, result)
        response = await _model_call(provider, request, on_text, trace, budget, result)
        if not response.tool_calls:
            result.text = response.text.strip()
            return result
        history.append(ChatMessage("assistant", response.text, tool_calls=response.tool_calls))
        await _run_calls(tools, response.tool_calls, history, result, trace, checkpoint)
        if budget is not None:
            budget.round_done()
        if isinstance(tools, Steered):
            history.extend(ChatMessage("user", text) for text in await tools.steering(response.text))
    log.warning("turn stopped after %d model calls without a final answer", max_turns)
    result.text = f"I stopped after {max_turns} steps without finishing. Ask me to continue if you want me to keep going."
    return result


async def _model_call(
    provider: ModelProvider,
    request: ModelRequest,
    on_text: TextDelta | None,
    trace: RunTrace,
    budget: RunBudget | None,
    result: TurnResult,
) -> ModelResponse:
    """One model call, counted in ``result`` and ``budget`` and recorded in ``trace``."""
    with trace.span("model", request.model):
        started = time.perf_counter()
        try:
            response = await provider.complete(request, on_text)
        except Exception as exc:  # the failed call is in the trace too, then the turn fails as before
            MODEL_CALLS.labels(request.model, "error").inc()
            MODEL_SECONDS.labels(request.model).observe(time.perf_counter() - started)
            trace.model_call(
                model=request.model,
                usage=Usage(),
                latency_ms=(time.perf_counter() - started) * 1000,
                stop_reason="error",
                tool_calls=0,
                error_class=type(exc).__name__,
            )
            raise
        MODEL_CALLS.labels(response.model or request.model, "ok").inc()
        MODEL_SECONDS.labels(response.model or request.model).observe(time.perf_counter() - started)
        trace.model_call(
            model=response.model or request.model,
            usage=response.usage,
            latency_ms=(time.perf_counter() - started) * 1000,
            stop_reason=response.stop_reason,
            tool_calls=len(response.tool_calls),
            system=request.system if result.model_calls == 0 else None,
            messages=request.messages,
            text=response.text,
        )
    result.model_calls += 1
    result.usage = result.usage + response.usage
    if budget is not None:
        budget.charge(response.usage)
    return response


async def _run_calls(
    tools: ToolBox,
    calls: Sequence[ToolCall],
    history: list[ChatMessage],
    result: TurnResult,
    trace: RunTrace,
    checkpoint: Checkpoint | None,
) -> None:
    """Run one response's tool calls in order, their results appended to ``history``."""
    for i, call in enumerate(calls):
        if checkpoint is not None and checkpoint.may_wait(call):
            state = Suspended(
                list(history), tuple(calls[i:]), result.usage, result.model_calls, list(result.tool_calls)
            )
            await checkpoint.save(state)
        outcome = await _tool_call(tools, call, trace)
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


async def _tool_call(tools: ToolBox, call: ToolCall, trace: RunTrace) -> ToolOutcome:
    with trace.span("tool", call.name):  # a child agent the tool starts is inside this span
        started = time.perf_counter()
        outcome = await tools.call(call)
        trace.tool_call(
            name=call.name,
            decision="refused" if outcome.refused else "allowed",
            duration_ms=(time.perf_counter() - started) * 1000,
            result_bytes=len(outcome.content.encode("utf-8", "surrogatepass")),
            error_class=outcome.error_class or ("error" if outcome.is_error else None),
            arguments=call.arguments,
            result=outcome.content,
        )
    return outcome


async def _wind_down(
    provider: ModelProvider,
    request: ModelRequest,
    on_text: TextDelta | None,
    trace: RunTrace,
    budget: RunBudget,
    spent: BudgetLimit,
    result: TurnResult,
) -> TurnResult:
    """The last model call of a run whose budget ran out: its answer is the reply.

    The tools stay declared (some APIs refuse a transcript with tool calls but no tool
    definitions); the note says they are no longer run, and calls in this answer are not run.
    """
    log.warning(
        "budget %s ran out (limit %g, used %g); winding the run down", spent.name, spent.limit, spent.used
    )
    trace.budget(spent, budget.snapshot())
    request = dataclasses.replace(request, system=f"{request.system}\n\n{spent.system_note()}")
    response = await _model_call(provider, request, on_text, trace, budget, result)
    answer = response.text.strip()
    result.text = f"{answer}\n\n{spent.user_notice()}" if answer else spent.user_notice()
    return result


def tool_result_text(value: Any) -> str:
    """Tool results reach the model as JSON text (a :class:`ToolResult`: its ``value``)."""
    if isinstance(value, ToolResult):
        value = value.value
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def tool_result_images(value: Any) -> tuple[ImageBlock, ...]:
    """The images a tool result carries besides its text (only a :class:`ToolResult` has any)."""
    return value.images if isinstance(value, ToolResult) else ()
