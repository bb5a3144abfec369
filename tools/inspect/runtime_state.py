"""``get_runtime_state`` (label ``runtime.inspect``): who this run is, what it may use, its
children and background jobs, its workspaces. Reads memory and the database, no network."""

from __future__ import annotations

from typing import Any

from gateway.store.delegation import background_tasks_from
from gateway.workspaces import SHARED, WORKSPACE, opened_roots, shared_workspace, thread_workspace
from tools.base import HostTool, ToolContext
from tools.inspect.runs import run_trace

PREFIX = "runtime.inspect"
VIEWS = ("self", "tools", "subagents", "workspace", "all")
MAX_JOBS = 20  # background jobs of the thread shown, newest first


def _self(ctx: ToolContext) -> dict[str, Any]:
    persona = ctx.persona
    budget = ctx.budget
    return {
        "persona": persona.name,
        "description": persona.description,
        "thread_id": ctx.thread_id,
        "run_id": ctx.run_id,
        "root_run_id": ctx.tree_run_id,
        "depth": ctx.depth,
        "model": persona.model_ref,
        "labels": list(persona.capabilities),
        "budget": None
        if budget is None
        else {
            "limits": {
                "max_tool_rounds": budget.limits.max_tool_rounds,
                "max_children": budget.limits.max_children,
                "max_tokens": budget.limits.max_tokens,
                "max_wall_seconds": budget.limits.max_wall_seconds,
            },
            "used": budget.snapshot(),
        },
    }


def _tools(ctx: ToolContext) -> dict[str, Any]:
    offered = ctx.offered() if ctx.offered is not None else None
    return {
        "host_tools": None if offered is None else [{"name": t.mcp_name, "label": t.prefix} for t in offered],
        # Names only: a server's settings may hold credentials.
        "mcp_servers": sorted(ctx.persona.mcp_servers),
    }


async def _subagents(ctx: ToolContext) -> dict[str, Any]:
    children: list[dict[str, Any]] = []
    if ctx.run_id is not None:
        _, events = await run_trace(ctx, ctx.run_id, True)
        children = [{"name": e.name, "at": e.at, **e.payload} for e in events if e.kind == "child"]
    jobs = await ctx.db.read(background_tasks_from, ctx.thread_id, limit=MAX_JOBS)
    return {
        "definitions": list(ctx.persona.subagents),
        "children_of_this_run": children,
        "background_jobs": [
            {
                "id": job.id,
                "profile": job.profile,
                "state": job.state,
                "created_at": job.created_at,
                "updated_at": job.updated_at,
                "error": job.error,
            }
            for job in jobs
        ],
    }


def _workspace(ctx: ToolContext) -> dict[str, Any]:
    labels = ctx.persona.capabilities
    readable, writable = opened_roots(labels, "fs.read"), opened_roots(labels, "fs.write")
    hosts = {
        WORKSPACE: thread_workspace(ctx.settings, ctx.persona.name, ctx.thread_id),
        SHARED: shared_workspace(ctx.settings, ctx.persona),
    }
    return {
        # The model's paths only: the host folders stay out of the model's view, as in the sandbox.
        "roots": [
            {
                "path": root,
                "exists": host.is_dir(),
                "read": root in readable or root in writable,
                "write": root in writable and not (root == SHARED and ctx.persona.shared_read_only),
            }
            for root, host in hosts.items()
        ],
        "git": None,  # Talon records no git state for a run
    }


async def get_runtime_state(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    view = args.get("view") or "all"
    result: dict[str, Any] = {"view": view}
    if view in ("self", "all"):
        result["self"] = _self(ctx)
    if view in ("tools", "all"):
        result["tools"] = _tools(ctx)
    if view in ("subagents", "all"):
        result["subagents"] = await _subagents(ctx)
    if view in ("workspace", "all"):
        result["workspace"] = _workspace(ctx)
    return result


TOOL = HostTool(
    mcp_name="get_runtime_state",
    internal_name="runtime.get_runtime_state",
    prefix=PREFIX,
    description=(
        "Inspect this run without any network request. view self: persona, thread, run ids, nesting "
        "depth, model, capability labels and the run's budgets with what is used; tools: the host tools "
        "this run is offered (with the label each needs) and the persona's MCP server names; subagents: "
        "the sub-agent definitions it may run, children this run started and the thread's background "
        "jobs; workspace: /workspace and /shared with their host folders and whether this run may read "
        "or write them; all (default): everything. Unknown fields are null, never guessed."
    ),
    input_schema={
        "type": "object",
        "properties": {"view": {"type": "string", "enum": list(VIEWS), "description": "Default all."}},
        "additionalProperties": False,
    },
    handler=get_runtime_state,
)
