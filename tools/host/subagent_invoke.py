"""``subagent_invoke``: run a named sub-agent synchronously and return its structured result.

The daemon's sub-agent runner (``ctx.services.subagents``, a
:class:`gateway.subagents.SubagentRunner`) does the work: it refuses sub-agents the persona
does not list or lacks the capabilities for, picks the model (with fallbacks), checks the
result against the sub-agent's ``output_schema`` and reads only this thread's data: file
sub-agents get the thread's workspace roots (:meth:`WorkspaceRoots.for_subagent`).
"""

from __future__ import annotations

from typing import Any

from tools.base import HostTool, ToolContext
from tools.workspace.roots import WorkspaceRoots

# Longer than any sub-agent's own timeout (at most 600 s), which ends the call first.
TIMEOUT = 630.0


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """Invoke ``args["name"]`` with ``args["input"]``; returns ``{summary, data, usage}``."""
    runner = ctx.require_services("sub-agents are not available in this context").subagents
    # File sub-agents read this thread's roots, exactly as the file tools would.
    roots = WorkspaceRoots.for_subagent(ctx.settings, ctx.persona, ctx.thread_id)
    result = await runner.invoke(
        args.get("name"),
        args.get("input"),
        persona=ctx.persona,
        thread_id=ctx.thread_id,
        db=ctx.db,
        roots=roots,
    )
    return result.as_dict()


TOOL = HostTool(
    mcp_name="subagent_invoke",
    internal_name="subagent.invoke",
    prefix="subagent.invoke",
    description=(
        "Run a named sub-agent (a focused helper model) and wait for its result: "
        "{summary, data, usage}. Only the sub-agents listed for this persona can be run."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The sub-agent, e.g. memory-retriever."},
            "input": {
                "type": "object",
                "description": 'Passed to the sub-agent, e.g. {"query": "..."}.',
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    handler=handle,
    timeout=TIMEOUT,
)
