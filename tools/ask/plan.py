"""``exit_plan_mode``: show a plan for approval and wait (model-tools reference, adapted: Talon has
no plan mode; the plan the model wrote is posted with Approve / Keep planning buttons, and a typed
reply is revision feedback). Label ``chat.ask``, as it asks the chat like ``ask_question``."""

from __future__ import annotations

from typing import Any

from tools.ask.common import DEFAULT_TIMEOUT, MAX_TIMEOUT, ask_humans
from tools.base import HostTool, ToolContext, ToolError

__all__ = ["MAX_PLAN_CHARS", "TOOL"]

MAX_PLAN_CHARS = 3000


async def exit_plan_mode(ctx: ToolContext, args: dict[str, Any]) -> Any:
    plan = str(args.get("plan") or "").strip()
    if not plan:
        raise ToolError("plan is empty; send the plan you wrote in your reply")
    spec = {"title": "📋 Plan for approval", "plan": plan}
    return await ask_humans(ctx, "plan", spec, args.get("timeout_seconds"))


TOOL = HostTool(
    mcp_name="exit_plan_mode",
    internal_name="chat.exit_plan_mode",
    prefix="chat.ask",
    description=(
        "Present an implementation plan for approval and wait. Write the plan in your reply text "
        "first, then call this with the same plan. Returns {action: 'approve'} (go ahead), "
        "{action: 'revise', feedback} (change the plan as asked and present it again), "
        "{action: 'timeout'}, or {action: 'decline'} where no human can answer."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "plan": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_PLAN_CHARS,
                "description": "the plan, as you wrote it in your reply",
            },
            "timeout_seconds": {
                "type": "number",
                "minimum": 10,
                "maximum": MAX_TIMEOUT,
                "description": f"how long to wait; default {DEFAULT_TIMEOUT:g}",
            },
        },
        "required": ["plan"],
        "additionalProperties": False,
    },
    handler=exit_plan_mode,
    timeout=MAX_TIMEOUT + 60,
    offered_to="roots",
    waits_for_human=True,
)
