"""The host-tool bridge: who may call which tool, the call itself, and its audit trail.

Every host-tool call, from the in-process agent loop or from ``talon mcp host-tools``
over the bridge socket, goes through :meth:`Bridge.call`:

1. the caller's run identity must be registered (and, over the socket, proven with the
   run's secret, thread and persona: :meth:`Bridge.authenticate`);
2. the tool must be one the persona may list (:func:`gateway.labels.may_list`);
3. the arguments must fit the tool's JSON schema;
4. :func:`gateway.labels.check` must allow the call, scope included;
5. a call the persona's ``approvals:`` gates waits for a human's approval
   (:class:`gateway.interactions.approvals.ApprovalGate`) and is refused unless approved;
6. the handler runs under the tool's timeout.

Each refusal, each permission and each result status is written to the audit log.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.errors import RefusedError
from gateway.findings import delivery_block
from gateway.labels import Decision, check, may_list, tool_prefixes
from gateway.metrics import TOOL_CALLS
from gateway.runtime.agent import tool_result_images, tool_result_text
from gateway.runtime.model import ImageBlock
from tools.arguments import ArgumentChecker
from tools.audit import AuditEntry, AuditLog, summarize_args
from tools.base import HostServices, HostTool, ToolContext

if TYPE_CHECKING:
    from gateway.budgets import RunBudget
    from gateway.config import Settings
    from gateway.interactions.approvals import ApprovalGate
    from gateway.personas import Persona
    from gateway.store.db import Database
    from gateway.tracing import RunTrace

__all__ = ["Bridge", "BridgeAuthError", "CallResult", "RunIdentity"]

log = logging.getLogger("talon.bridge")

SECRET_BYTES = 32

# Environment variables that carry a run identity to ``talon mcp host-tools``.
ENV_SOCKET = "TALON_BRIDGE_SOCKET"
ENV_RUN_ID = "TALON_RUN_ID"
ENV_SECRET = "TALON_RUN_SECRET"
ENV_THREAD = "TALON_THREAD_ID"
ENV_PERSONA = "TALON_PERSONA"


@dataclass(frozen=True, slots=True)
class RunIdentity:
    """Who is calling: one agent run (or ad-hoc MCP session) and its per-run secret.

    Attributes:
        run_id (:obj:`int`): The ``runs`` row of the turn or session.
        thread_id (:obj:`int`): The thread the run belongs to.
        persona (:obj:`str`): The persona whose capability labels apply.
        secret (:obj:`str`): ``secrets.token_urlsafe(32)``; proves the identity over the socket.
        sender_id (:obj:`str` | :obj:`None`): The one sender the turn answers (the tools'
            :attr:`tools.base.ToolContext.sender_id`).
        budget (:class:`gateway.budgets.RunBudget` | :obj:`None`): The root run's budgets,
            shared with its children (the tools' :attr:`tools.base.ToolContext.budget`).
        depth (:obj:`int`): 0 for a turn or session; a child agent's nesting depth (its labels,
            narrowed from its parent's, are the registration's persona).
        root_run_id (:obj:`int` | :obj:`None`): A child's root run of its delegation tree.
        trace (:class:`gateway.tracing.RunTrace` | :obj:`None`): The run's trace (the tools'
            :attr:`tools.base.ToolContext.trace`), where a child's start and end are recorded.
    """

    run_id: int
    thread_id: int
    persona: str
    secret: str = field(repr=False)
    sender_id: str | None = field(default=None, repr=False)
    budget: RunBudget | None = field(default=None, repr=False, compare=False)
    depth: int = 0
    root_run_id: int | None = None
    trace: RunTrace | None = field(default=None, repr=False, compare=False)
    interactive: bool = False  # a human in the chat can answer (tools.base.ToolContext.interactive)

    def environment(self, socket_path: Path | str) -> dict[str, str]:
        """The environment that lets ``talon mcp host-tools`` act as this run."""
        return {
            ENV_SOCKET: str(socket_path),
            ENV_RUN_ID: str(self.run_id),
            ENV_SECRET: self.secret,
            ENV_THREAD: str(self.thread_id),
            ENV_PERSONA: self.persona,
        }


@dataclass(frozen=True, slots=True)
class CallResult:
    """What a call produced, ready for the model.

    Attributes:
        content (:obj:`str`): JSON text of the result, or the error message.
        is_error (:obj:`bool`): The model should read ``content`` as an error.
        refused (:obj:`bool`): The handler never ran (not permitted, bad arguments, unknown tool).
        unknown_tool (:obj:`bool`): The tool does not exist for this persona (it is not listed);
            MCP reports that as a protocol error rather than a tool result.
        images (tuple[:class:`gateway.runtime.model.ImageBlock`, ...]): Images the result
            carries besides ``content`` (``view_image``).
    """

    content: str
    is_error: bool = False
    refused: bool = False
    unknown_tool: bool = False
    images: tuple[ImageBlock, ...] = ()
    error_class: str | None = None  # for traces: which of the failures below it was


class BridgeAuthError(RefusedError):
    """A request did not prove a registered run identity; the message says which part failed."""


@dataclass(slots=True)
class _Registration:
    identity: RunIdentity
    expires_at: float | None
    persona: Persona | None = None  # the persona as this run sees it (a profile may narrow its labels)


class Bridge:
    """Decides, dispatches and audits host-tool calls.

    Args:
        db (:class:`gateway.store.db.Database`): The daemon's database (tools and the audit log).
        settings (:class:`gateway.config.Settings`): The daemon's settings.
        personas (Mapping[:obj:`str`, :class:`gateway.personas.Persona`]): Loaded personas by name.
        services (:class:`tools.base.HostServices`, optional): Daemon capabilities for tools.
        tools (Sequence[:class:`tools.base.HostTool`], optional): The tools on offer; defaults
            to every tool in :mod:`tools.registry`.
    """

    def __init__(
        self,
        *,
        db: Database,
        settings: Settings,
        personas: Mapping[str, Persona],
        services: HostServices | None = None,
        tools: Sequence[HostTool] | None = None,
    ):
        if tools is None:
            from tools import registry

            tools = registry.all_tools()
        self.db = db
        self.settings = settings
        self.personas = personas
        self.services = services
        self.audit = AuditLog(db, settings.secrets())
        self._tools: tuple[HostTool, ...] = tuple(
            t for t in tools if t.available is None or t.available(settings)
        )
        self._by_name = {t.mcp_name: t for t in self._tools}
        self._checkers = {t.mcp_name: ArgumentChecker(t.mcp_name, t.input_schema) for t in self._tools}
        self._runs: dict[int, _Registration] = {}
        # Decisions that do not depend on the arguments, per (labels, tool): a persona's
        # labels are fixed while the daemon runs.
        self._listable: dict[tuple[tuple[str, ...], str], bool] = {}
        self._unscoped: dict[tuple[tuple[str, ...], str], Decision] = {}
        self.approvals: ApprovalGate | None = None  # wired by the daemon; None: no call waits

    # ------------------------------------------------------------ identities

    def register(
        self,
        run_id: int,
        thread_id: int,
        persona: str,
        *,
        ttl: float | None = None,
        as_persona: Persona | None = None,
        sender_id: str | None = None,
        budget: RunBudget | None = None,
        depth: int = 0,
        root_run_id: int | None = None,
        trace: RunTrace | None = None,
        interactive: bool = False,
    ) -> RunIdentity:
        """Give a run its identity and secret; valid until :meth:`unregister` (or ``ttl`` seconds).

        ``as_persona`` is the persona as this run holds it when it differs from the loaded
        one (a background session's profile without ``background_agent``, a child agent's
        narrowed labels: the bridge lists and allows only those); ``budget`` is the
        root run's :class:`gateway.budgets.RunBudget`, which its tools see.

        Raises:
            :exc:`KeyError`: ``persona`` is not loaded.
        """
        if persona not in self.personas:
            raise KeyError(f"no persona named {persona!r}; loaded: {', '.join(self.personas) or '(none)'}")
        identity = RunIdentity(
            run_id,
            thread_id,
            persona,
            secrets.token_urlsafe(SECRET_BYTES),
            sender_id,
            budget,
            depth,
            root_run_id,
            trace,
            interactive,
        )
        expires = None if ttl is None else time.monotonic() + ttl
        self._runs[run_id] = _Registration(identity, expires, as_persona)
        return identity

    def _persona(self, identity: RunIdentity) -> Persona | None:
        entry = self._runs.get(identity.run_id)
        if entry is not None and entry.identity is identity and entry.persona is not None:
            return entry.persona
        return self.personas.get(identity.persona)

    def unregister(self, run_id: int) -> None:
        """Forget the run: its secret stops working at once."""
        self._runs.pop(run_id, None)

    def active(self, identity: RunIdentity) -> bool:
        """Whether ``identity`` is the one currently registered for its run."""
        entry = self._runs.get(identity.run_id)
        if entry is None or entry.identity is not identity:
            return False
        if entry.expires_at is not None and time.monotonic() > entry.expires_at:
            self._runs.pop(identity.run_id, None)
            return False
        return True

    @property
    def active_runs(self) -> int:
        return len(self._runs)

    async def authenticate(
        self, *, run_id: Any, secret: Any, thread_id: Any, persona: Any, tool: str | None = None
    ) -> RunIdentity:
        """Match a socket request's claims against the registered run.

        The secret is compared in constant time. A failed attempt is audited as ``refused``.

        Raises:
            :class:`BridgeAuthError`: With the reason.
        """
        entry = self._runs.get(run_id) if isinstance(run_id, int) and not isinstance(run_id, bool) else None
        reason: str | None = None
        if entry is None or not self.active(entry.identity):
            reason = "unknown or finished run"
        elif not isinstance(secret, str) or not hmac.compare_digest(
            secret.encode(), entry.identity.secret.encode()
        ):
            reason = "the secret does not match the run"
        elif thread_id != entry.identity.thread_id:
            reason = "the thread does not match the run"
        elif persona != entry.identity.persona:
            reason = "the persona does not match the run"
        if reason is None and entry is not None:
            return entry.identity
        self.audit.record(
            AuditEntry(
                run_id if isinstance(run_id, int) else None,
                thread_id if isinstance(thread_id, int) else None,
                str(persona)[:64] if persona is not None else None,
                tool[:64] if isinstance(tool, str) else None,
                "refused",
                detail=f"authentication failed: {reason}",
            )
        )
        raise BridgeAuthError(reason)

    # ------------------------------------------------------------ tools

    @property
    def tools(self) -> tuple[HostTool, ...]:
        return self._tools

    def tools_for(self, identity: RunIdentity) -> list[HostTool]:
        """The tools ``identity``'s persona may see, in registry order."""
        persona = self._persona(identity)
        if persona is None:
            return []
        child = identity.root_run_id is not None
        return [t for t in self._tools if self._may_list(persona, t) and t.offered_in(child=child)]

    def _check(self, persona: Persona, tool: HostTool, args: dict[str, Any]) -> Decision:
        if tool.scope_arg is not None or tool.prefix_by_arg is not None:
            return check(persona.capabilities, tool, args)
        key = (persona.capabilities, tool.mcp_name)
        decision = self._unscoped.get(key)
        if decision is None:
            decision = self._unscoped[key] = check(persona.capabilities, tool, args)
        return decision

    def _may_list(self, persona: Persona, tool: HostTool) -> bool:
        key = (persona.capabilities, tool.mcp_name)
        listable = self._listable.get(key)
        if listable is None:
            listable = self._listable[key] = may_list(persona.capabilities, tool)
        return listable

    def may_wait(self, identity: RunIdentity, name: str) -> bool:
        """Whether a call of ``name`` may wait for a human (a question, an approval gate)."""
        tool = self._by_name.get(name)
        persona = self._persona(identity)
        if tool is None or persona is None:
            return False
        policy = persona.approvals
        return tool.waits_for_human or (
            policy is not None and policy.gates(tool.mcp_name, tool_prefixes(tool))
        )

    def _extend(self, identity: RunIdentity, seconds: float) -> None:
        """Time spent waiting for a human does not count against the run's identity."""
        entry = self._runs.get(identity.run_id)
        if entry is not None and entry.identity is identity and entry.expires_at is not None:
            entry.expires_at += seconds

    async def call(
        self, identity: RunIdentity, name: str, args: Any, *, call_id: str | None = None
    ) -> CallResult:
        """Decide, run and audit one call (``call_id``: the model's id of it, when it has one).

        Never raises for a bad call: every refusal and failure comes back as a
        :class:`CallResult` with ``is_error`` set and a message the model can act on.
        """
        persona = self._persona(identity)
        tool = self._by_name.get(name) if isinstance(name, str) else None
        shown = name[:64] if isinstance(name, str) else None
        if persona is None or not self.active(identity):
            self._record(identity, shown, "refused", detail="the run is not active")
            return CallResult(
                "this run has ended; host tools are no longer available", True, True, error_class="run_ended"
            )
        if tool is None:
            names = ", ".join(t.mcp_name for t in self.tools_for(identity)) or "none"
            self._record(identity, shown, "refused", detail="unknown tool")
            return CallResult(
                f"unknown tool {shown!r}; available: {names}", True, True, True, error_class="unknown_tool"
            )
        labels = persona.capabilities
        if not self._may_list(persona, tool):
            reason = check(labels, tool, {}).reason
            self._record(identity, tool.mcp_name, "refused", detail=reason)
            return CallResult(reason, True, refused=True, unknown_tool=True, error_class="not_permitted")
        if not tool.offered_in(child=identity.root_run_id is not None):
            whom = "child agents" if tool.offered_to == "children" else "top-level runs, not to child agents"
            reason = f"{tool.mcp_name} is offered to {whom} only"
            self._record(identity, tool.mcp_name, "refused", detail=reason)
            return CallResult(reason, True, refused=True, unknown_tool=True, error_class="not_permitted")
        problem = self._checkers[tool.mcp_name].problem(args)
        if problem is not None:
            self._record(identity, tool.mcp_name, "refused", detail=f"invalid arguments: {problem}")
            return CallResult(
                f"invalid arguments for {tool.mcp_name}: {problem}",
                True,
                refused=True,
                error_class="invalid_arguments",
            )
        decision = self._check(persona, tool, args)
        if not decision.allowed:
            self._record(identity, tool.mcp_name, "refused", detail=decision.reason)
            return CallResult(decision.reason, True, refused=True, error_class="not_permitted")
        refusal = await self._approval(identity, persona, tool, args, call_id)
        if refusal is not None:
            return refusal
        self._record(
            identity,
            tool.mcp_name,
            "allowed",
            detail=f"{decision.reason}; {summarize_args(args, tool.scope_arg)}",
        )
        return await self._run(identity, persona, tool, args, call_id)

    async def _approval(
        self,
        identity: RunIdentity,
        persona: Persona,
        tool: HostTool,
        args: dict[str, Any],
        call_id: str | None,
    ) -> CallResult | None:
        """None when the call may run; else the refusal. Gated calls wait for a human's decision."""
        policy = persona.approvals
        if policy is None or not policy.gates(tool.mcp_name, tool_prefixes(tool)):
            return None
        if self.approvals is None:
            reason = f"{tool.mcp_name} needs approval, and approvals are not available here; it was not run"
            self._record(identity, tool.mcp_name, "refused", detail=reason)
            return CallResult(reason, True, refused=True, error_class="not_approved")
        self._record(
            identity, tool.mcp_name, "approval", detail=f"requested; {summarize_args(args, tool.scope_arg)}"
        )
        started = time.monotonic()
        verdict = await self.approvals.decide(
            policy,
            tool_name=tool.mcp_name,
            args=args,
            thread_id=identity.thread_id,
            run_id=identity.run_id,
            call_id=call_id,
            sender_id=identity.sender_id,
            interactive=identity.interactive and identity.root_run_id is None and identity.depth == 0,
        )
        self._extend(identity, time.monotonic() - started)
        status = "ok" if verdict.approved else ("timeout" if "timed out" in verdict.detail else "error")
        self._record(identity, tool.mcp_name, "approval", status, verdict.detail)
        if verdict.approved:
            return None
        return CallResult(verdict.message, True, refused=True, error_class="not_approved")

    async def _run(
        self,
        identity: RunIdentity,
        persona: Persona,
        tool: HostTool,
        args: dict[str, Any],
        call_id: str | None = None,
    ) -> CallResult:
        ctx = ToolContext(
            thread_id=identity.thread_id,
            persona=persona,
            db=self.db,
            settings=self.settings,
            services=self.services,
            run_id=identity.run_id,
            sender_id=identity.sender_id,
            budget=identity.budget,
            trace=identity.trace,
            offered=partial(self.tools_for, identity),
            root_run_id=identity.root_run_id,
            depth=identity.depth,
            call_id=call_id,
            interactive=identity.interactive,
        )
        started = time.perf_counter()
        try:
            async with asyncio.timeout(tool.timeout):
                value = await tool.handler(ctx, args)
            content = tool_result_text(value)
            if identity.root_run_id is not None:  # a child's workspace_subscribe deliveries
                content += await delivery_block(self.db, identity.run_id)
            images = tool_result_images(value)
        except RefusedError as exc:
            message = str(exc) or f"{tool.mcp_name} failed"
            self._record(identity, tool.mcp_name, "result", "error", message)
            return CallResult(message, is_error=True, error_class="tool_error")
        except TimeoutError:
            self._record(identity, tool.mcp_name, "result", "timeout", f"no result within {tool.timeout:g}s")
            return CallResult(
                f"{tool.mcp_name} timed out after {tool.timeout:g}s; try a smaller request or try again later",
                is_error=True,
                error_class="timeout",
            )
        except asyncio.CancelledError:
            self._record(identity, tool.mcp_name, "result", "error", "canceled")
            raise
        except Exception as exc:
            log.exception("host tool %s failed (run %s)", tool.mcp_name, identity.run_id)
            self._record(identity, tool.mcp_name, "result", "error", f"internal error: {type(exc).__name__}")
            return CallResult(f"internal error in {tool.mcp_name}", is_error=True, error_class="internal")
        elapsed = (time.perf_counter() - started) * 1000
        if tool.waits_for_human:
            self._extend(identity, elapsed / 1000)
        shown = f"{elapsed:.1f} ms, {len(content)} chars" + (f", {len(images)} images" if images else "")
        self._record(identity, tool.mcp_name, "result", "ok", shown)
        return CallResult(content, images=images)

    def _record(
        self,
        identity: RunIdentity,
        tool: str | None,
        decision: str,
        status: str | None = None,
        detail: str | None = None,
    ) -> None:
        # A name the model made up is not a label value: it would grow the series without bound.
        known = tool if tool in self._by_name else "(unknown)"
        TOOL_CALLS.labels(known, decision, status or "").inc()
        self.audit.record(
            AuditEntry(
                identity.run_id,
                identity.thread_id,
                identity.persona,
                tool,
                decision,  # type: ignore[arg-type]
                status,  # type: ignore[arg-type]
                detail,
            )
        )
