"""The child-agent tools' limits, as the model meets them: schema refusals from the bridge's
argument checker and the handlers' own bounds."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.children.jobs import MAX_STEERING_BYTES, steer_job
from gateway.delegation import DelegationError
from tools.agents import agent, compose, jobs
from tools.arguments import ArgumentChecker
from tools.base import ToolContext, ToolError


def problem(tool: Any, args: dict[str, Any]) -> str | None:
    return ArgumentChecker(tool.mcp_name, tool.input_schema).problem(args)


def test_agent_takes_at_most_eight_attachments_and_known_modes() -> None:
    assert problem(agent.TOOL, {"prompt": "x", "attachments": [f"/workspace/{i}.png" for i in range(9)]})
    assert (
        problem(agent.TOOL, {"prompt": "x", "mode": "later"}) == "mode must be one of foreground, background"
    )
    assert problem(agent.TOOL, {"prompt": "x", "max_tool_use_iterations": 1001}) is not None
    assert problem(agent.TOOL, {"prompt": "x", "attachments": ["/workspace/a.png"] * 8}) is None


def test_compose_takes_at_most_twenty_nodes_and_well_formed_edges() -> None:
    nodes = [{"id": f"n{i}", "prompt": "x"} for i in range(21)]
    assert problem(compose.TOOL, {"nodes": nodes}) is not None
    assert problem(compose.TOOL, {"nodes": nodes[:20]}) is None
    assert "edges[0]" in (problem(compose.TOOL, {"nodes": nodes[:2], "edges": [{"from": "n0"}]}) or "")
    assert problem(compose.TOOL, {"nodes": nodes[:2], "node_timeout_ms": 999}) is not None
    assert problem(compose.TOOL, {"nodes": [{"id": "a", "prompt": "x", "max_tool_rounds": 0}]}) is not None


class _NoServices:
    """A context whose services are never reached: the bounds are checked first."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"reached {name}")


async def test_emit_progress_bounds_its_message_and_metadata() -> None:
    ctx: ToolContext = _NoServices()  # type: ignore[assignment]
    with pytest.raises(ToolError, match="the limit is 2048"):
        await jobs.progress(ctx, {"message": "é" * 1025})
    with pytest.raises(ToolError, match=r"metadata is .* bytes as JSON; the limit is 4096"):
        await jobs.progress(ctx, {"message": "ok", "metadata": {"k": "x" * 5000}})


async def test_a_steering_message_is_bounded_and_not_empty() -> None:
    with pytest.raises(DelegationError, match=f"the limit is {MAX_STEERING_BYTES}"):
        await steer_job(
            None, job_id="j", message="x" * (MAX_STEERING_BYTES + 1), origin_thread_id=1, persona="p"
        )  # type: ignore[arg-type]
    with pytest.raises(DelegationError, match="message is empty"):
        await steer_job(None, job_id="j", message="  ", origin_thread_id=1, persona="p")  # type: ignore[arg-type]
