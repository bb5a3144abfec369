"""``skill``: load a skill's instructions into the turn (inline) or run them as a child (fork)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from gateway.skills import MAX_SKILL_BYTES, Skill
from tools.agents.common import admit_child, children
from tools.agents.plan import ChildRequest, plan_child_async
from tools.base import HostTool, ToolContext, ToolError
from tools.skills.common import resolve_skill

__all__ = ["MAX_ARGUMENT_CHARS", "TOOL", "instructions"]

MAX_ARGUMENT_CHARS = 16 * 1024
PLACEHOLDER = "$ARGUMENTS"


def instructions(skill: Skill, arguments: str) -> str:
    """The SKILL.md body with ``$ARGUMENTS`` replaced (or the arguments appended when it has none)."""
    if PLACEHOLDER in skill.body:
        return skill.body.replace(PLACEHOLDER, arguments.strip() or "(none given)")
    if arguments.strip():
        return f"{skill.body}\n\n## Arguments\n{arguments.strip()}"
    return skill.body


def _read_file(skill: Skill, file: str) -> dict[str, Any]:
    if file not in skill.files:
        shown = ", ".join(skill.files) or "none"
        raise ToolError(f"the skill {skill.name!r} has no file {file!r}; its files: {shown}")
    path = skill.folder / file
    with path.open("rb") as f:
        raw = f.read(MAX_SKILL_BYTES + 1)
    if len(raw) > MAX_SKILL_BYTES:
        raise ToolError(f"{file!r} is larger than {MAX_SKILL_BYTES // 1024} KB, too large to load")
    try:
        return {"skill": skill.name, "file": file, "content": raw.decode("utf-8")}
    except UnicodeDecodeError:
        raise ToolError(f"{file!r} is not UTF-8 text") from None


def _fork_labels(
    ctx: ToolContext, labels: tuple[str, ...], allowed: tuple[str, ...] | None
) -> tuple[str, ...]:
    """The child's labels: those of its plan that carry the prefix of a tool the skill allows."""
    if allowed is None:
        return labels
    offered = {t.mcp_name: t.prefix for t in (ctx.offered() if ctx.offered else ())}
    unknown = sorted(set(allowed) - set(offered))
    if unknown:
        raise ToolError(
            f"the skill's allowed_tools name tools this persona is not offered: {', '.join(unknown)}; "
            "ask the operator to fix its SKILL.md"
        )
    prefixes = {offered[name] for name in allowed}
    return tuple(label for label in labels if label.partition(":")[0] in prefixes)


async def _fork(ctx: ToolContext, skill: Skill, arguments: str) -> dict[str, Any]:
    """Run the skill as a foreground child agent of this run: the parent's labels (never more),
    narrowed to the tools the skill allows, on the skill's model when it names one."""
    service = children(ctx)
    request = ChildRequest(
        prompt=instructions(skill, arguments), model=skill.model, id_prefix=f"skill-{skill.name}"
    )
    plan = await plan_child_async(ctx, service, request, leaf=False, background=False)
    persona = replace(
        plan.persona, capabilities=_fork_labels(ctx, plan.persona.capabilities, skill.allowed_tools)
    )
    admit_child(ctx)
    outcome = await service.run(
        replace(plan, persona=persona),
        thread_id=ctx.thread_id,
        sender_id=ctx.sender_id,
        root_budget=ctx.budget,
        trace=ctx.trace,
    )
    return {"skill": skill.name, "mode": "fork", **outcome.public()}


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    skill = await resolve_skill(ctx, args.get("name"))
    file = args.get("file")
    if file is not None:
        return await asyncio.to_thread(_read_file, skill, str(file))
    arguments = str(args.get("arguments") or "")
    if skill.mode == "fork":
        return await _fork(ctx, skill, arguments)
    out: dict[str, Any] = {
        "skill": skill.name,
        "mode": "inline",
        "instructions": instructions(skill, arguments),
        "files": list(skill.files),
    }
    if skill.allowed_tools is not None:
        out["allowed_tools"] = list(skill.allowed_tools)
    return out


TOOL = HostTool(
    mcp_name="skill",
    internal_name="skill.use",
    prefix="skill.use",
    description=(
        "Load one of your skills by name: its instructions come back for you to follow now (inline "
        "skills), or a child agent runs them with your labels (narrowed to the skill's allowed_tools) and "
        "its answer comes back (fork skills). Your skills are listed with their "
        "descriptions in the Skills section of your instructions. A skill's files are outside your "
        "workspace: read one by calling skill again with file set to a name from its files list."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 64, "description": "Skill name, e.g. meeting-notes."},
            "arguments": {
                "type": "string",
                "maxLength": MAX_ARGUMENT_CHARS,
                "description": "What to apply the skill to (replaces $ARGUMENTS in its instructions).",
            },
            "file": {
                "type": "string",
                "maxLength": 500,
                "description": "Read this file of the skill (from its files list) instead of its instructions.",
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    handler=handle,
    timeout=3600.0,  # a fork skill waits for its child agent, as the agent tool does
)
