"""``background_agent``: long-running agent sessions that report back into this thread."""

from __future__ import annotations

from typing import Any

from tools.base import HostTool, ToolContext, ToolError
from tools.host.delegation_tools import delegation

ACTIONS = ("spawn", "status", "cancel", "result", "profiles")


async def handle(ctx: ToolContext, args: dict[str, Any]) -> Any:
    service = delegation(ctx)
    action = args["action"]
    if action == "profiles":
        return service.profiles()
    if action == "spawn":
        if not args.get("prompt"):
            raise ToolError("spawn needs prompt: what the background agent should do")
        return await service.spawn(
            persona=ctx.persona.name,
            origin_thread_id=ctx.thread_id,
            prompt=args["prompt"],
            profile=args.get("profile"),
            provider=args.get("provider"),
            working_directory=args.get("workingDirectory"),
            timeout_minutes=args.get("timeoutMinutes"),
            providers=ctx.settings.providers,
        )
    task_id = args.get("taskId")
    if not task_id:
        raise ToolError(f"{action} needs taskId (spawn returned it)")
    if action == "cancel":
        return await service.cancel_background(task_id, ctx.thread_id)
    task = await service.background(task_id, ctx.thread_id)
    out = {"taskId": task.id, "state": task.state, "profile": task.profile}
    if action == "result":
        if task.state not in ("completed", "failed", "canceled"):
            raise ToolError(f"task {task_id} is still {task.state}; its result is posted here when it ends")
        out["result"] = task.result
        if task.error:
            out["error"] = task.error
    return out


TOOL = HostTool(
    mcp_name="background_agent",
    internal_name="subagent.background",
    prefix="subagent.background",
    description=(
        "Start and manage long-running background agent sessions. spawn returns a taskId at once; the "
        "result is posted into this conversation when the task ends. Call profiles first to see which "
        "persona profiles are available."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS)},
            "prompt": {"type": "string", "description": "Required for spawn: the task."},
            "taskId": {"type": "string", "description": "For status, cancel and result."},
            "provider": {"type": "string", "description": "Optional provider override for spawn."},
            "profile": {
                "type": "string",
                "description": "Optional persona profile for spawn (see profiles).",
            },
            "workingDirectory": {
                "type": "string",
                "description": "Optional, a folder inside the profile's shared workspace (/shared).",
            },
            "timeoutMinutes": {"type": "number", "description": "Optional; minimum effective value is 15."},
        },
        "required": ["action"],
        "additionalProperties": False,
    },
    handler=handle,
)
