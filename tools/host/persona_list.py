"""``persona_list``: the personas this one may delegate to."""

from __future__ import annotations

from typing import Any

from tools.base import HostTool, ToolContext
from tools.host.delegation_tools import delegation


async def handle(ctx: ToolContext, args: dict[str, Any]) -> list[dict[str, Any]]:
    return delegation(ctx).cards(ctx.persona.name)


TOOL = HostTool(
    mcp_name="persona_list",
    internal_name="persona.list",
    prefix="persona.send",
    description="List the other loaded personas as cards {name, description, skills}, for persona_send.",
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    handler=handle,
)
