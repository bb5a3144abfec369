"""``agent``: dispatch a child agent, in the foreground (wait for it) or the background."""

from __future__ import annotations

from typing import Any

from gateway.runtime.model import ProviderError
from gateway.workspaces import SHARED
from tools.agents.common import admit_child, children
from tools.agents.plan import MAX_ATTACHMENTS, MAX_PROMPT_CHARS, MAX_ROOTS, ChildRequest, plan_child_async
from tools.base import HostTool, ToolContext, ToolError

ROOTS_SCHEMA: dict[str, Any] = {"type": "array", "items": {"type": "string"}, "maxItems": MAX_ROOTS}
ATTACHMENTS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string"},
    "maxItems": MAX_ATTACHMENTS,
    "description": f"Up to {MAX_ATTACHMENTS} image paths under /workspace or /shared (not base64).",
}


def request_of(args: dict[str, Any], *, where: str = "") -> ChildRequest:
    """The child-shaping arguments of an ``agent`` call or a compose node."""
    return ChildRequest(
        prompt=args["prompt"],
        model=args.get("model"),
        agent_type=args.get("agent_type") or args.get("subagent_type"),
        max_turns=args.get("max_turns") or 0,
        max_tool_rounds=args.get("max_tool_use_iterations") or args.get("max_tool_rounds") or 0,
        cwd=args.get("cwd"),
        read_roots=tuple(args.get("readRoots") or ()),
        write_roots=tuple(args.get("writeRoots") or ()),
        attachments=tuple(args.get("attachments") or ()),
        progress_events=bool(args.get("progress_events")),
        id_prefix=args.get("id_prefix"),
        where=where,
    )


def _in_shared(cwd: str | None) -> str | None:
    """A background child's working directory relative to /shared (plan_child checked it is there)."""
    if not cwd:
        return None
    return cwd.removeprefix(SHARED).strip("/") or None


async def handle(ctx: ToolContext, args: dict[str, Any]) -> Any:
    service = children(ctx)
    background = args.get("mode") == "background"
    plan = await plan_child_async(ctx, service, request_of(args), leaf=False, background=background)
    admit_child(ctx)
    if background:
        return await service.start_background(
            plan,
            origin_thread_id=ctx.thread_id,
            working_directory=_in_shared(args.get("cwd")),
            sender_id=ctx.sender_id,
        )
    try:
        outcome = await service.run(
            plan, thread_id=ctx.thread_id, sender_id=ctx.sender_id, root_budget=ctx.budget, trace=ctx.trace
        )
    except ProviderError as exc:
        raise ToolError(
            f"the child agent's model {plan.persona.model_ref} failed: {exc}; try again later or "
            "pass another model"
        ) from None
    return outcome.public()


TOOL = HostTool(
    mcp_name="agent",
    internal_name="agent.dispatch",
    prefix="agent.dispatch",
    description=(
        "Dispatch a child agent with its own context and tools. Foreground (default) waits and returns "
        "{result, usage, toolCalls, runId}; background returns a jobId at once and posts the result into "
        "this conversation when it is done (it survives a restart of the gateway). The child holds at most "
        "your labels (narrowed further by agent_type's allowlist), works in your workspaces (/workspace, "
        "/shared) only, and at the nesting limit it cannot dispatch further. agent_type is a persona "
        "profile (persona_list) or a sub-agent definition; model is '<provider>:<model>' with a provider "
        "of talon.yaml. A background child has its own /workspace: share files through /shared."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "prompt": {
                "type": "string",
                "maxLength": MAX_PROMPT_CHARS,
                "description": "The task for the child.",
            },
            "mode": {"type": "string", "enum": ["foreground", "background"]},
            "model": {
                "type": "string",
                "description": "'<provider>:<model>'; defaults to the agent type's or yours.",
            },
            "agent_type": {
                "type": "string",
                "description": "A persona profile or sub-agent definition: its prompt, allowlist and model.",
            },
            "subagent_type": {"type": "string", "description": "Alias of agent_type."},
            "max_turns": {
                "type": "integer",
                "minimum": 0,
                "maximum": 100,
                "description": "Model calls; 0 = default.",
            },
            "max_tool_use_iterations": {
                "type": "integer",
                "minimum": 0,
                "maximum": 1000,
                "description": "Tool rounds before a graceful wind-down (a last call whose tools are not run).",
            },
            "cwd": {
                "type": "string",
                "description": "The child's working directory under /workspace or /shared.",
            },
            "readRoots": {**ROOTS_SCHEMA, "description": "Roots the child may read, under your workspaces."},
            "writeRoots": {
                **ROOTS_SCHEMA,
                "description": "Roots the child may write, under your workspaces.",
            },
            "attachments": ATTACHMENTS_SCHEMA,
            "progress_events": {"type": "boolean", "description": "Give the child emit_progress."},
            "id_prefix": {"type": "string", "maxLength": 32, "description": "Label for log correlation."},
        },
        "required": ["prompt"],
        "additionalProperties": False,
    },
    handler=handle,
    timeout=3600.0,
)
