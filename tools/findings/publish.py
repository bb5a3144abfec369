"""``workspace_publish``: share an entry with the other agents of this run's delegation tree."""

from __future__ import annotations

import time
from typing import Any

from gateway.store.findings import RELATION_TYPES, NewFinding, get_findings, publish
from tools.base import HostTool, ToolContext, ToolError
from tools.findings.common import TYPE_SCHEMA, entry_type, tree_of

__all__ = ["MAX_CONTENT_CHARS", "MAX_ENTRIES", "TOOL"]

MAX_CONTENT_CHARS = 16 * 1024
MAX_SUBJECT_CHARS = 200
MAX_EVIDENCE = 20
MAX_EVIDENCE_CHARS = 500
MAX_RELATES = 20
MAX_ENTRIES = 500  # per root run


def _confidence(value: Any) -> float:
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ToolError("confidence must be a number from 0 to 1 (default 1.0)")
    return float(value)


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    tree = tree_of(ctx)
    kind = entry_type(args.get("type"), required=True)
    content = args.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ToolError("content is required: the full text of the entry")
    if len(content) > MAX_CONTENT_CHARS:
        raise ToolError(f"content is {len(content)} characters; keep an entry under {MAX_CONTENT_CHARS}")
    subject = str(args.get("subject") or "").strip()
    if len(subject) > MAX_SUBJECT_CHARS:
        raise ToolError(f"subject is a short label of at most {MAX_SUBJECT_CHARS} characters")
    evidence = args.get("evidence") or []
    if len(evidence) > MAX_EVIDENCE:
        raise ToolError(f"evidence holds at most {MAX_EVIDENCE} references")
    relates = [int(i) for i in args.get("relates_to") or []]
    relation = args.get("relation_type")
    if relation is not None and relation not in RELATION_TYPES:
        raise ToolError(f"relation_type must be one of {', '.join(RELATION_TYPES)}")
    if relation is not None and not relates:
        raise ToolError("relation_type needs relates_to: the ids of the entries it relates to")
    if relates:
        known = {r.id for r in await ctx.db.read(get_findings, tree, relates)}
        missing = [i for i in relates if i not in known]
        if missing:
            raise ToolError(
                f"relates_to names entries this run does not have: {missing}; workspace_query shows their ids"
            )
    entry = NewFinding(
        root_run_id=tree,
        run_id=ctx.run_id,
        persona=ctx.persona.name,
        type=str(kind),
        subject=subject,
        content=content.strip(),
        evidence=tuple(str(e) for e in evidence),
        confidence=_confidence(args.get("confidence")),
        relates_to=tuple(relates),
        relation_type=relation if relates else None,
    )
    entry_id = await ctx.db.run_transaction(publish, entry, now=time.time(), max_entries=MAX_ENTRIES)
    return {"id": entry_id, "type": kind, "subject": subject}


TOOL = HostTool(
    mcp_name="workspace_publish",
    internal_name="workspace.publish",
    prefix="workspace.share",
    description=(
        "Publish a structured entry to this task's shared workspace: the agents of one run and its child "
        "agents (another conversation's run never sees it). Siblings find it with workspace_query at once, "
        "new child agents see it in their instructions, and subscribed children get it at their next tool "
        "call. Not durable memory: entries are swept after a day (memory_update keeps facts)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "type": {
                **TYPE_SCHEMA,
                "description": "finding, evidence, hypothesis, decision, artifact or status.",
            },
            "content": {"type": "string", "maxLength": MAX_CONTENT_CHARS, "description": "The full text."},
            "subject": {
                "type": "string",
                "maxLength": MAX_SUBJECT_CHARS,
                "description": "Short label for routing, e.g. 'auth refresh'.",
            },
            "evidence": {
                "type": "array",
                "maxItems": MAX_EVIDENCE,
                "items": {"type": "string", "maxLength": MAX_EVIDENCE_CHARS},
                "description": "References backing it, e.g. /workspace/src/auth.py:141 or a URL.",
            },
            "confidence": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "0 to 1 (default 1).",
            },
            "relates_to": {
                "type": "array",
                "maxItems": MAX_RELATES,
                "items": {"type": "integer"},
                "description": "Ids of related entries.",
            },
            "relation_type": {"type": "string", "enum": list(RELATION_TYPES)},
        },
        "required": ["type", "content"],
        "additionalProperties": False,
    },
    handler=handle,
)
