"""Which skills a persona may use, and the one lookup of a skill by name for a call."""

from __future__ import annotations

import asyncio

from gateway.skills import NAME, Skill, SkillError, approved_dir, load_folder, load_skill
from gateway.store.procedures import ProcedureRow, get_procedure, list_procedures
from tools.base import ToolContext, ToolError

__all__ = ["available_names", "resolve_skill"]


async def available_names(ctx: ToolContext) -> list[str]:
    """The persona.yaml skills and the approved procedures of the calling persona."""
    approved = await ctx.db.read(list_procedures, ctx.persona.name, status="approved")
    return [*ctx.persona.skills, *(p.name for p in approved if p.name not in ctx.persona.skills)]


async def resolve_skill(ctx: ToolContext, name: object) -> Skill:
    """The skill ``name`` as this persona may use it, or a refusal naming the ones it may."""
    if not isinstance(name, str) or not NAME.match(name):
        raise ToolError(f"name must be a skill name in kebab-case; available: {await _shown(ctx)}")
    try:
        if name in ctx.persona.skills:
            skill = await asyncio.to_thread(load_skill, ctx.settings.config_dir, name)
            if skill is None:
                raise ToolError(f"the skill {name!r} is listed for this persona but its folder is gone")
            return skill
        row: ProcedureRow | None = await ctx.db.read(get_procedure, ctx.persona.name, name)
        if row is not None and row.status == "approved":
            return await asyncio.to_thread(
                load_folder, approved_dir(ctx.settings.data_path, row.persona, name)
            )
    except SkillError as exc:
        raise ToolError(f"the skill {name!r} cannot be loaded: {exc}") from None
    if row is not None:
        raise ToolError(
            f"{name!r} is a procedure draft that no operator has approved yet (`talon skills approve "
            f"{ctx.persona.name} {name}`); until then follow it by reading it with memory_search, or use "
            f"one of: {await _shown(ctx)}"
        )
    raise ToolError(f"this persona has no skill named {name!r}; available: {await _shown(ctx)}")


async def _shown(ctx: ToolContext) -> str:
    return ", ".join(await available_names(ctx)) or "none"
