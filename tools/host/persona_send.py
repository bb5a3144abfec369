"""``persona_send``: hand a task to another persona through the durable queue (A2A)."""

from __future__ import annotations

from typing import Any

from tools.base import HostTool, ToolContext
from tools.host.delegation_tools import delegation

# await_reply may wait up to the configured maximum (30 min); the bridge's own timeout
# must not cut it short.
AWAIT_CEILING = 1800.0


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return await delegation(ctx).send(
        caller=ctx.persona.name,
        caller_thread_id=ctx.thread_id,
        target=args["target_persona"],
        message=args["message"],
        await_reply=bool(args.get("await_reply", False)),
    )


TOOL = HostTool(
    mcp_name="persona_send",
    internal_name="persona.send",
    prefix="persona.send",
    description=(
        "Send a task to another persona. By default returns {task_id, state} at once and the result is "
        "posted into this conversation when the task ends; with await_reply true, waits for the result."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "target_persona": {
                "type": "string",
                "description": "Name of the destination persona (see persona_list).",
            },
            "message": {"type": "string", "description": "The task or message to send."},
            "await_reply": {
                "type": "boolean",
                "description": "Wait for the target's answer (blocks this turn).",
            },
        },
        "required": ["target_persona", "message"],
        "additionalProperties": False,
    },
    handler=handle,
    timeout=AWAIT_CEILING + 60,
    scope_arg="target_persona",
)
