"""``memory_update``: store, supersede or remove facts, and set the hot memory block.

Hot memory is one short block per scope that every later turn's system prompt carries
(:func:`gateway.memory_scopes.hot_memory_section`); facts go to the searchable archive that
``memory_search`` ranks. A fact goes where ``scope`` says; without it, to the person the
turn answers when the labels open ``user`` and the turn has one sender, else to the thread,
so nothing is shared more widely than asked for.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from gateway.store import facts
from gateway.store.facts import Scope, ScopeKey
from tools.base import HostTool, ToolContext, ToolError
from tools.memory.common import (
    CATEGORY_SCHEMA,
    MAX_EVIDENCE_CHARS,
    MAX_FACT_CHARS,
    MAX_FACTS_PER_SCOPE,
    MAX_HOT_CHARS,
    SCOPE_SCHEMA,
    bounded_text,
    category,
    pick,
    turn_keys,
)

TARGETS = ("hot", "fact")
ACTIONS = ("set", "supersede", "remove")


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    target, action = args.get("target"), args.get("action")
    if target not in TARGETS:
        raise ToolError(
            "target is required: hot (the block in your system prompt) or fact (the searchable archive)"
        )
    if action not in ACTIONS:
        raise ToolError(f"action is required: one of {', '.join(ACTIONS)}")
    keys = await turn_keys(ctx)
    if not keys:
        raise ToolError("this persona holds no memory.access label that opens a scope")
    if target == "hot":
        if ctx.root_run_id is not None:
            raise ToolError(
                "a child agent cannot replace hot memory; store what you learned with target fact, "
                "or report it in your answer for the parent to keep"
            )
        return await _hot(ctx, args, action, keys)
    if action == "set":
        return await _add(ctx, args, _default_key(ctx, args, keys))
    if action == "supersede":
        return await _supersede(ctx, args, keys)
    return await _remove(ctx, args, keys)


def _default_key(ctx: ToolContext, args: dict[str, Any], keys: dict[Scope, ScopeKey]) -> ScopeKey:
    scope = args.get("scope")
    if scope is not None:
        return pick(keys, scope, ctx)
    return keys.get("user") or keys["thread"]


async def _hot(
    ctx: ToolContext, args: dict[str, Any], action: str, keys: dict[Scope, ScopeKey]
) -> dict[str, Any]:
    if action != "set":
        raise ToolError("hot memory supports only action 'set'; to clear it, set content to an empty string")
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolError("content is required: the whole new hot memory block ('' clears it)")
    if len(content) > MAX_HOT_CHARS:
        raise ToolError(
            f"hot memory is {len(content)} characters; keep it under {MAX_HOT_CHARS} (move details into facts)"
        )
    key = _default_key(ctx, args, keys)
    await ctx.db.run_transaction(facts.set_hot, key, content.strip(), time.time())
    return {
        "target": "hot",
        "scope": key.scope,
        "chars": len(content.strip()),
        "cleared": not content.strip(),
    }


def _fact_fields(args: dict[str, Any], *, category_required: bool) -> tuple[str, str | None, str | None]:
    content = bounded_text(args.get("content"), "content", MAX_FACT_CHARS)
    evidence = args.get("evidence")
    if evidence is not None:
        evidence = bounded_text(evidence, "evidence", MAX_EVIDENCE_CHARS)
    return content, category(args.get("category"), required=category_required), evidence


async def _add(ctx: ToolContext, args: dict[str, Any], key: ScopeKey) -> dict[str, Any]:
    content, cat, evidence = _fact_fields(args, category_required=True)
    assert cat is not None

    def add(conn: sqlite3.Connection) -> int:
        if facts.count_facts(conn, key) >= MAX_FACTS_PER_SCOPE:
            raise ToolError(
                f"the {key.scope} memory already holds {MAX_FACTS_PER_SCOPE} facts; remove or supersede some first"
            )
        return facts.add_fact(conn, key, category=cat, content=content, evidence=evidence, now=time.time())

    fact_id = await ctx.db.run_transaction(add)
    return {"target": "fact", "id": fact_id, "scope": key.scope, "category": cat}


def _fact_id(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ToolError(f"{what} is required: the id of a fact, as memory_search shows it")
    return value


async def _supersede(ctx: ToolContext, args: dict[str, Any], keys: dict[Scope, ScopeKey]) -> dict[str, Any]:
    old_id = _fact_id(args.get("supersedes"), "supersedes")
    content, cat, evidence = _fact_fields(args, category_required=False)
    reachable = list(keys.values())

    def supersede(conn: sqlite3.Connection) -> tuple[int, ScopeKey, str]:
        old = facts.get_fact(conn, old_id, reachable)
        if old is None:
            raise ToolError(f"no fact {old_id} in the memory you can reach; memory_search shows fact ids")
        if old.status != "active":
            raise ToolError(f"fact {old_id} was already superseded; supersede the fact that replaced it")
        key = keys[old.scope]  # the new fact stays in the scope of the one it replaces
        new_category = cat or old.category
        new_id = facts.supersede_fact(
            conn, old_id, key, category=new_category, content=content, evidence=evidence, now=time.time()
        )
        return new_id, key, new_category

    new_id, key, new_category = await ctx.db.run_transaction(supersede)
    return {
        "target": "fact",
        "id": new_id,
        "supersedes": old_id,
        "scope": key.scope,
        "category": new_category,
    }


async def _remove(ctx: ToolContext, args: dict[str, Any], keys: dict[Scope, ScopeKey]) -> dict[str, Any]:
    fact_id = _fact_id(args.get("id"), "id")
    removed = await ctx.db.run_transaction(facts.remove_fact, fact_id, list(keys.values()))
    if not removed:
        raise ToolError(f"no fact {fact_id} in the memory you can reach; memory_search shows fact ids")
    return {"target": "fact", "id": fact_id, "removed": True}


TOOL = HostTool(
    mcp_name="memory_update",
    internal_name="memory.update",
    prefix="memory.access",
    description=(
        "Store a fact in your searchable memory, or replace your hot memory: a short block (at most "
        f"{MAX_HOT_CHARS} characters) that every later turn's system prompt carries. target fact: action set "
        "stores a new fact (category required), supersede replaces fact `supersedes` keeping it as history, "
        "remove deletes fact `id`. target hot: only set, with the whole new block ('' clears it; not for "
        "child agents). scope: "
        "thread, user (the person you are answering, private to them) or persona (everyone who talks to "
        "you); default user when this turn answers one person and your labels allow it, else thread."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "target": {"type": "string", "enum": list(TARGETS)},
            "action": {"type": "string", "enum": list(ACTIONS)},
            "content": {
                "type": "string",
                "description": f"Required for set and supersede. Facts up to {MAX_FACT_CHARS} characters.",
            },
            "category": {**CATEGORY_SCHEMA, "description": "Required for a new fact."},
            "evidence": {
                "type": "string",
                "description": "Where the fact comes from (a message, file:line, commit, link).",
            },
            "supersedes": {"type": "integer", "description": "The fact id replaced (action supersede)."},
            "id": {"type": "integer", "description": "The fact id to delete (action remove)."},
            "scope": SCOPE_SCHEMA,
        },
        "required": ["target", "action"],
        "additionalProperties": False,
    },
    handler=handle,
)
