"""From an ``agent`` call's (or compose node's) arguments to a checked :class:`ChildPlan`.

The child's labels are decided here, once: the caller's labels (already narrowed if the
caller is itself a child) intersected with the agent type's allowlist
(:func:`gateway.labels.narrow_labels`), without ``agent.dispatch`` at the nesting limit or in
a compose node (nodes are leaves: no agent, compose or skill), and with the workspace labels
narrowed to the roots the call names. The bridge then lists and allows only those labels for
the child's identity: a child can never use a label its parent lacks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gateway.children.plan import ChildPlan, Lineage
from gateway.labels import narrow_labels, parse_label
from gateway.workspaces import SHARED, WORKSPACE, opened_roots
from tools.base import ToolContext, ToolError
from tools.workspace.roots import WorkspaceRoots
from tools.workspace.view_image import view_image

if TYPE_CHECKING:
    from gateway.children.service import Children
    from gateway.personas import Persona

__all__ = ["MAX_ATTACHMENTS", "MAX_PROMPT_CHARS", "ChildRequest", "plan_child", "resolve_model"]

MAX_ATTACHMENTS = 8
MAX_PROMPT_CHARS = 100_000
MAX_ROOTS = 16
# Labels a child never holds: background_agent sessions stay a root's affair, and
# agent.progress is granted only through progress_events.
_NEVER = ("subagent.background", "agent.progress")
_LEAF_DROPS = ("agent.dispatch", "skill.use")
PROGRESS_LABEL = "agent.progress"


@dataclass(frozen=True, slots=True)
class ChildRequest:
    """The arguments that shape a child, whatever tool asks for it."""

    prompt: str
    model: str | None = None
    agent_type: str | None = None
    max_turns: int = 0
    max_tool_rounds: int = 0
    cwd: str | None = None
    read_roots: Sequence[str] = ()
    write_roots: Sequence[str] = ()
    attachments: Sequence[str] = ()
    progress_events: bool = False
    id_prefix: str | None = None
    where: str = ""  # how messages name the arguments ("nodes[2].")


def resolve_model(ctx: ToolContext, value: str) -> tuple[str, str]:
    """``(provider, model)`` of a ``<provider>:<model>`` whose provider talon.yaml configures.

    Raises:
        :class:`ToolError`: Naming the configured providers; there is never a fallback.
    """
    provider, _, model = value.partition(":")
    configured = sorted(ctx.settings.providers)
    if provider in configured and model.strip():
        return provider, model.strip()
    raise ToolError(
        f"model {value!r} is not configured: send '<provider>:<model>' with a provider of talon.yaml "
        f"({', '.join(configured) or 'none configured'}), e.g. {ctx.persona.model_ref!r} (this persona's "
        "model), or leave model out to use the parent's; no other model is tried instead"
    )


def _agent_type(ctx: ToolContext, children: Children, name: str) -> tuple[Persona, tuple[str, ...], str]:
    """``(profile, allowlist, default model)`` of an agent type: a persona profile (its prompt,
    labels and model) or a sub-agent definition (its prompt, required capabilities and model)."""
    services = ctx.require_services("child agents are not available in this session")
    personas = services.delegation.personas
    if name in personas:
        profile = personas[name]
        return profile, profile.capabilities, profile.model_ref
    definitions = services.subagents.definitions
    definition = definitions.get(name)
    if definition is None:
        known = sorted({*personas, *definitions})
        raise ToolError(
            f"agent_type {name!r} is neither a persona profile nor a sub-agent definition; "
            f"known: {', '.join(known)}; or leave agent_type out for a child like yourself"
        )
    models = services.subagents.models_for(name)
    usable = [m for m in models if m.partition(":")[0] in ctx.settings.providers]
    default = usable[0] if usable else ctx.persona.model_ref
    profile = replace(ctx.persona, system_prompt=definition.prompt, personality=())
    return profile, definition.required_capabilities, default


def plan_child(
    ctx: ToolContext, children: Children, request: ChildRequest, *, leaf: bool, background: bool
) -> ChildPlan:
    """Check the request against the caller and build the child's plan.

    Raises:
        :class:`ToolError`: What was wrong and what to send instead.
    """
    depth = ctx.depth + 1
    if ctx.depth >= children.max_depth:
        raise ToolError(
            f"this agent is a child at depth {ctx.depth}, the nesting limit "
            f"(delegation.max_child_depth {children.max_depth}); do the work yourself"
        )
    w = request.where
    if not request.prompt.strip():
        raise ToolError(f"{w}prompt is empty; say what the child agent should do")
    if len(request.prompt) > MAX_PROMPT_CHARS:
        raise ToolError(
            f"{w}prompt has {len(request.prompt):,} characters; the limit is {MAX_PROMPT_CHARS:,}"
        )
    base, default_model = ctx.persona, ctx.persona.model_ref
    labels = tuple(base.capabilities)
    system, personality = base.system_prompt, base.personality
    if request.agent_type:
        profile, allowlist, default_model = _agent_type(ctx, children, request.agent_type)
        labels = narrow_labels(labels, allowlist)
        system, personality = profile.system_prompt, profile.personality
    provider, model = resolve_model(ctx, request.model or default_model)
    drops = set(_NEVER)
    if leaf:
        drops.update(_LEAF_DROPS)
    if depth >= children.max_depth:
        drops.add("agent.dispatch")
    labels = tuple(label for label in labels if (_prefix(label) or "") not in drops)
    labels, notes = _roots(labels, base.capabilities, request, background)
    if request.progress_events:
        labels = (*labels, PROGRESS_LABEL)
    persona = replace(
        base,
        capabilities=labels,
        system_prompt=system,
        personality=personality,
        provider=provider,
        model=model,
        mcp_servers={},
    )
    notes += _attachments(ctx, persona, request)
    prompt = request.prompt if not notes else request.prompt + "\n\n" + "\n".join(notes)
    return ChildPlan(
        persona=persona,
        prompt=prompt,
        lineage=Lineage(depth, ctx.run_id, ctx.tree_run_id),
        max_turns=request.max_turns or base.max_turns or ctx.settings.agent.max_turns,
        max_tool_rounds=request.max_tool_rounds,
        progress_events=request.progress_events,
        id_prefix=request.id_prefix,
    )


def _prefix(label: str) -> str | None:
    parsed = parse_label(label)
    return parsed.prefix if parsed else None


def _roots(
    labels: tuple[str, ...], held: Sequence[str], request: ChildRequest, background: bool
) -> tuple[tuple[str, ...], list[str]]:
    """Check cwd/readRoots/writeRoots against the caller's workspaces and narrow the child's
    ``fs.*`` labels to the roots they name; also the lines that tell the child about them."""
    w = request.where
    readable = opened_roots(held, "fs.read") | opened_roots(held, "fs.write")
    writable = opened_roots(held, "fs.write")
    named: list[tuple[str, str, frozenset[str]]] = []
    if request.cwd is not None:
        named.append((f"{w}cwd", request.cwd, readable))
    for key, values, allowed in (
        ("readRoots", request.read_roots, readable),
        ("writeRoots", request.write_roots, writable),
    ):
        if len(values) > MAX_ROOTS:
            raise ToolError(f"{w}{key} has {len(values)} paths; the limit is {MAX_ROOTS}")
        named.extend((f"{w}{key}[{i}]", v, allowed) for i, v in enumerate(values))
    if not named:
        return labels, []
    read_in: set[str] = set()
    write_in: set[str] = set()
    for what, path, allowed in named:
        root = _root_of(what, path, allowed)
        if background and root == WORKSPACE:
            raise ToolError(
                f"{what} {path!r} is in {WORKSPACE}, but a background child works on a thread of its own "
                f"with its own {WORKSPACE}: share files through {SHARED} instead"
            )
        read_in.add(root)
        if "writeRoots" in what:
            write_in.add(root)
    allowed = [label for label in labels if (_prefix(label) or "") not in ("fs.read", "fs.write")]
    allowed.append(f"fs.read:{_scope(read_in)}")
    if write_in:
        allowed.append(f"fs.write:{_scope(write_in)}")
    narrowed = narrow_labels(labels, allowed)
    notes = []
    if request.cwd is not None:
        notes.append(f"[working directory: {request.cwd}]")
    if request.read_roots:
        notes.append(f"[read roots: {', '.join(request.read_roots)}]")
    if request.write_roots:
        notes.append(f"[write roots: {', '.join(request.write_roots)}]")
    return narrowed, notes


def _scope(roots: set[str]) -> str:
    return "persona" if SHARED in roots else "thread"


def _root_of(what: str, path: Any, allowed: frozenset[str]) -> str:
    """The root (/workspace or /shared) an absolute path lies in, if the caller may use it."""
    shown = " and ".join(sorted(allowed)) or "no workspace (this agent has no fs.read or fs.write label)"
    if not isinstance(path, str) or not path.startswith("/") or "\x00" in path:
        raise ToolError(f"{what} must be an absolute path under {shown}, e.g. {WORKSPACE}/project")
    parts = path.split("/")
    if ".." in parts:
        raise ToolError(f"{what} {path!r} contains '..'; send a path without it under {shown}")
    for root in (WORKSPACE, SHARED):
        if path == root or path.startswith(root + "/"):
            if root in allowed:
                return root
            break
    raise ToolError(f"{what} {path!r} is outside the workspaces this agent may use: {shown}")


def _attachments(ctx: ToolContext, persona: Persona, request: ChildRequest) -> list[str]:
    paths = list(request.attachments)
    w = request.where
    if not paths:
        return []
    if len(paths) > MAX_ATTACHMENTS:
        raise ToolError(f"{w}attachments has {len(paths)} images; the limit is {MAX_ATTACHMENTS}")
    roots = WorkspaceRoots.for_persona(ctx.settings, ctx.persona, ctx.thread_id, "read")
    for path in paths:
        view_image(roots, path)  # refuses paths outside the roots and files that are not images
    tool = "view_image" if any(_prefix(label) == "fs.read" for label in persona.capabilities) else None
    how = f"open them with {tool}" if tool else "they are named for reference only"
    return [f"[attached images ({how}): {', '.join(paths)}]"]


async def plan_child_async(
    ctx: ToolContext, children: Children, request: ChildRequest, *, leaf: bool, background: bool
) -> ChildPlan:
    """:func:`plan_child` off the event loop (attachments are read from disk)."""
    if not request.attachments:
        return plan_child(ctx, children, request, leaf=leaf, background=background)
    return await asyncio.to_thread(plan_child, ctx, children, request, leaf=leaf, background=background)
