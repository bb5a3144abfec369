"""``compose``: run a dependency graph of child agents (:mod:`gateway.children.compose`)."""

from __future__ import annotations

from typing import Any

from gateway.children.compose import GraphNode, check_graph, compose_key, run_graph
from gateway.children.plan import ChildOutcome, ChildPlan
from gateway.store.children import batch_anchor
from tools.agents.agent import ATTACHMENTS_SCHEMA, ROOTS_SCHEMA, request_of
from tools.agents.common import admit_child, children
from tools.agents.plan import MAX_PROMPT_CHARS, plan_child_async
from tools.base import HostTool, ToolContext, ToolError

MAX_NODES = 20
MIN_TIMEOUT_MS = 1000
MAX_TIMEOUT_MS = 3_600_000
DEFAULT_ROUNDS = 50


def _rounds(args: dict[str, Any]) -> int:
    value = args.get("max_tool_rounds_per_node")
    if value is None:
        value = args.get("max_tool_calls_per_node")  # the deprecated alias; the new field wins
    return value if value is not None else DEFAULT_ROUNDS


async def handle(ctx: ToolContext, args: dict[str, Any]) -> Any:
    service = children(ctx)
    nodes = args["nodes"]
    ids = [n["id"] for n in nodes]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ToolError(f"node ids must be unique; {', '.join(map(repr, duplicates))} appear more than once")
    upstream = check_graph(ids, [(e["from"], e["to"]) for e in args.get("edges") or ()])
    timeout_ms = args.get("node_timeout_ms")
    timeout = None if timeout_ms is None else min(max(timeout_ms, MIN_TIMEOUT_MS), MAX_TIMEOUT_MS) / 1000
    rounds = _rounds(args)
    plans: dict[str, ChildPlan] = {}
    for i, node in enumerate(nodes):
        request = request_of({"max_tool_rounds": rounds, **node}, where=f"nodes[{i}].")
        plans[node["id"]] = await plan_child_async(ctx, service, request, leaf=True, background=False)
    anchor = await ctx.db.read(batch_anchor, ctx.thread_id)
    key = compose_key(ctx.thread_id, f"item {anchor}" if anchor is not None else f"run {ctx.run_id}", args)

    async def run_node(node: GraphNode, prompt: str) -> ChildOutcome:
        admit_child(ctx)
        plan = plans[node.id]
        return await service.run(
            _with_prompt(plan, prompt),
            thread_id=ctx.thread_id,
            sender_id=ctx.sender_id,
            root_budget=ctx.budget,
            trace=ctx.trace,
            kind="node",
        )

    graph = [GraphNode(node["id"], plans[node["id"]].prompt) for node in nodes]
    return await run_graph(
        graph,
        upstream,
        run_node=run_node,
        db=ctx.db,
        key=key,
        fail_fast=args.get("fail_fast", True),
        node_timeout=timeout,
        parallel=service.settings.delegation.compose_parallel,
    )


def _with_prompt(plan: ChildPlan, prompt: str) -> ChildPlan:
    from dataclasses import replace

    return replace(plan, prompt=prompt)


_NODE = {
    "type": "object",
    "properties": {
        "id": {
            "type": "string",
            "minLength": 1,
            "maxLength": 64,
            "description": "Unique node id used by edges.",
        },
        "prompt": {"type": "string", "maxLength": MAX_PROMPT_CHARS, "description": "Task for this node."},
        "model": {"type": "string", "description": "'<provider>:<model>' override."},
        "cwd": {"type": "string"},
        "readRoots": ROOTS_SCHEMA,
        "writeRoots": ROOTS_SCHEMA,
        "max_tool_rounds": {"type": "integer", "minimum": 1, "maximum": 1000},
        "max_turns": {"type": "integer", "minimum": 1, "maximum": 100},
        "agent_type": {"type": "string"},
        "attachments": ATTACHMENTS_SCHEMA,
    },
    "required": ["id", "prompt"],
    "additionalProperties": False,
}

TOOL = HostTool(
    mcp_name="compose",
    internal_name="agent.compose",
    prefix="agent.dispatch",
    description=(
        f"Run up to {MAX_NODES} child agents as a dependency graph: nodes without upstream edges run in "
        "parallel (up to delegation.compose_parallel at once), a node waits for the nodes with edges to it and "
        "receives their outputs as untrusted data. Nodes are leaves (no agent, compose or skill) and hold at "
        "most your labels. fail_fast (default true): on a failure, nodes not started are skipped and running "
        "ones canceled. Finished nodes are recorded, so if this turn is retried after a crash the same call "
        "reuses them. Returns per-node status, output and usage, and the overall outcome."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "nodes": {"type": "array", "minItems": 1, "maxItems": MAX_NODES, "items": _NODE},
            "edges": {
                "type": "array",
                "maxItems": 400,
                "items": {
                    "type": "object",
                    "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
                    "required": ["from", "to"],
                    "additionalProperties": False,
                },
            },
            "fail_fast": {"type": "boolean"},
            "node_timeout_ms": {
                "type": "number",
                "minimum": MIN_TIMEOUT_MS,
                "description": f"Per-node time limit; clamped to {MAX_TIMEOUT_MS}.",
            },
            "max_tool_rounds_per_node": {"type": "integer", "minimum": 1, "maximum": 1000},
            "max_tool_calls_per_node": {
                "type": "integer",
                "minimum": 1,
                "maximum": 1000,
                "description": "Deprecated alias of max_tool_rounds_per_node.",
            },
        },
        "required": ["nodes"],
        "additionalProperties": False,
    },
    handler=handle,
    timeout=3600.0,
)
