"""``persona_list``: the personas this one may delegate to."""

from __future__ import annotations

from typing import Any

from gateway.store.procedures import list_procedures
from tools.base import HostTool, ToolContext
from tools.host.delegation_tools import delegation


async def handle(ctx: ToolContext, args: dict[str, Any]) -> list[dict[str, Any]]:
    cards = delegation(ctx).cards(ctx.persona.name)
    approved = await ctx.db.read(list_procedures, status="approved")
    for card in cards:  # a persona's approved procedures are skills of it too
        listed = {s["name"] for s in card["skills"]}
        card["skills"] += [
            {"name": p.name, "description": p.description}
            for p in approved
            if p.persona == card["name"] and p.name not in listed
        ]
    return cards


TOOL = HostTool(
    mcp_name="persona_list",
    internal_name="persona.list",
    prefix="persona.send",
    description=(
        "List the other loaded personas as cards {name, description, skills: [{name, description}]}, "
        "for persona_send."
    ),
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    handler=handle,
)
