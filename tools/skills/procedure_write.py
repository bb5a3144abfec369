"""``procedure_write``: save a reusable procedure as a skill draft of the persona.

The draft is ``<data_dir>/skills/drafts/<persona>/<name>/SKILL.md`` (front matter generated)
and a row of the ``procedures`` table, which memory_search reads at once. The skill tool runs
it only after an operator approved it with ``talon skills approve PERSONA NAME``.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from gateway.memory_scopes import allowed_scopes
from gateway.skills import MAX_NAME_CHARS, NAME, draft_dir, render_skill_md
from gateway.store.procedures import count_procedures, get_procedure, write_procedure
from tools.base import HostTool, ToolContext, ToolError

__all__ = ["MAX_CONTENT_CHARS", "MAX_PROCEDURES", "TOOL", "describe"]

MAX_CONTENT_CHARS = 32 * 1024
MAX_PROCEDURES = 200  # per persona
DESCRIPTION_CHARS = 200


def describe(content: str) -> str:
    """The first heading or line of ``content``, as the skill's description."""
    for line in content.splitlines():
        text = line.strip().lstrip("#").strip()
        if text:
            return text[:DESCRIPTION_CHARS]
    return "a procedure"


def _save(folder: Path, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = folder / ".SKILL.md.tmp"
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, folder / "SKILL.md")


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    if not allowed_scopes(ctx.persona.capabilities):
        raise ToolError("procedure_write needs a memory.access label (any scope)")
    name = args.get("name")
    if not isinstance(name, str) or not NAME.match(name) or len(name) > MAX_NAME_CHARS:
        raise ToolError(
            f"name must be kebab-case (a-z, 0-9 and single '-', at most {MAX_NAME_CHARS} characters), "
            "e.g. deploy-checklist"
        )
    content = args.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ToolError("content is required: the procedure as markdown, steps a future run can follow")
    if len(content) > MAX_CONTENT_CHARS:
        raise ToolError(f"content is {len(content)} characters; keep a procedure under {MAX_CONTENT_CHARS}")
    persona = ctx.persona.name
    existing = await ctx.db.read(get_procedure, persona, name)
    if existing is None and await ctx.db.read(count_procedures, persona) >= MAX_PROCEDURES:
        raise ToolError(
            f"this persona already has {MAX_PROCEDURES} procedures; rewrite one by its name instead"
        )
    description = describe(content)
    folder = draft_dir(ctx.settings.data_path, persona, name)
    await asyncio.to_thread(_save, folder, render_skill_md(name, description, content))
    row = await ctx.db.run_transaction(
        write_procedure, persona, name, description=description, content=content.strip(), now=time.time()
    )
    return {
        "procedure": row.name,
        "status": "draft",
        "replaced": existing is not None,
        "note": "searchable with memory_search now; usable with the skill tool once an operator runs "
        f"`talon skills approve {persona} {name}`",
    }


TOOL = HostTool(
    mcp_name="procedure_write",
    internal_name="procedure.write",
    prefix="memory.access",
    description=(
        "Save a reusable procedure (markdown steps) under a kebab-case name. It becomes a draft skill of "
        "this persona: memory_search finds it at once, and the skill tool runs it after an operator "
        "approves it with `talon skills approve`. Writing an existing name replaces it (and it needs "
        "approval again). Content at most 32 KB."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 64, "description": "kebab-case, e.g. deploy-checklist."},
            "content": {
                "type": "string",
                "maxLength": MAX_CONTENT_CHARS,
                "description": "The procedure in markdown; its first line becomes the description.",
            },
        },
        "required": ["name", "content"],
        "additionalProperties": False,
    },
    handler=handle,
    offered_to="roots",
)
