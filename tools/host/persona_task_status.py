"""``persona_task_status``: the state or result of a task started from this thread."""

from __future__ import annotations

from typing import Any

from tools.base import HostTool, ToolContext, ToolError
from tools.host.delegation_tools import delegation
from tools.host.persona_send import AWAIT_CEILING


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    wait_ms = args.get("wait_ms")
    if wait_ms is not None and wait_ms < 0:
        raise ToolError("wait_ms must be zero or more milliseconds")
    return await delegation(ctx).status(
        task_id=args["task_id"], caller_thread_id=ctx.thread_id, wait_ms=wait_ms
    )


TOOL = HostTool(
    mcp_name="persona_task_status",
    internal_name="persona.task_status",
    prefix="persona.send",
    description=(
        "Fetch the state (submitted, working, completed, failed, canceled) and result of a task you sent "
        "with persona_send. wait_ms waits for a terminal state up to that many milliseconds."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "task_id": {"type": "string", "description": "The task_id persona_send returned."},
            "wait_ms": {"type": "number", "description": "Wait up to this long for the task to finish."},
        },
        "required": ["task_id"],
        "additionalProperties": False,
    },
    handler=handle,
    timeout=AWAIT_CEILING + 60,
)
