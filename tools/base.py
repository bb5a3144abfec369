"""What a host-tool handler receives and how it reports errors.

A handler is ``async def handler(ctx: ToolContext, args: dict) -> Any``; its return value
must be JSON-serializable. Raise :class:`ToolError` (or any other
:class:`gateway.errors.RefusedError`, such as a service's refusal) with a message the model
can act on (what was wrong and what to send instead); any other exception is logged and
reported to the model as an internal error without details.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from gateway.errors import RefusedError

if TYPE_CHECKING:
    from gateway.budgets import RunBudget
    from gateway.children.service import Children
    from gateway.config import Settings
    from gateway.delegation import Delegation
    from gateway.outbox_spool import FileSource
    from gateway.personas import Persona
    from gateway.store.db import Database
    from gateway.subagents import SubagentRunner
    from gateway.tracing import RunTrace


class ToolError(RefusedError):
    """An error the model should see verbatim."""


class HostServices(Protocol):
    """Daemon capabilities that tools reach through the context (wired by the daemon)."""

    @property
    def delegation(self) -> Delegation:
        """The persona-to-persona delegation service (persona_send, background_agent, ...)."""

    @property
    def subagents(self) -> SubagentRunner:
        """The sub-agent runner behind ``subagent_invoke``."""

    @property
    def children(self) -> Children:
        """The child-agent service behind ``agent``, ``compose`` and the background-job tools."""

    async def send_to_channel(
        self,
        *,
        channel: str,
        markdown: str,
        origin_thread_id: int | None,
        persona: str | None,
        chat_id: str | None = None,
        reply_to: str | None = None,
        attachments: Sequence[FileSource] = (),
    ) -> dict[str, Any]:
        """Commit a Markdown message and its files to the outbox of ``channel``; returns delivery info."""


@dataclass(slots=True)
class ToolContext:
    """Who is calling: the run, its thread and persona, and the persona's labels."""

    thread_id: int
    persona: Persona  # persona.name, persona.capabilities (labels), persona.allowed_domains, ...
    db: Database
    settings: Settings
    services: HostServices | None = None
    run_id: int | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    # The platform id of the one sender the turn answers; None when it answers several, or none
    # (a schedule, an ad-hoc session). The memory tools' user scope needs it.
    sender_id: str | None = None
    # The run at the root of this delegation tree (a child agent's or compose node's
    # ancestor turn); None when this run is itself the root. Shared findings are kept per root.
    root_run_id: int | None = None
    # 0 for a turn; a child agent's nesting depth (agent and compose refuse past the limit).
    depth: int = 0
    # The budgets of the root run this call belongs to (gateway.budgets): a tool that starts a
    # child calls budget.admit_child() first and charges the child's model calls to it.
    # None outside a budgeted run (an ad-hoc MCP session).
    budget: RunBudget | None = None
    # The run's trace (gateway.tracing): a tool that starts a child records it there with
    # trace.child_started()/child_ended(). None outside a traced run.
    trace: RunTrace | None = None
    # The host tools this run is offered, in registry order (the bridge's listing for the run);
    # None outside the bridge.
    offered: Callable[[], Sequence[HostTool]] | None = None
    # The model's id of this tool call: a run resumed after a restart makes the same call again
    # (gateway.interactions finds the question it asked). None outside the agent loop.
    call_id: str | None = None
    # A human in the chat can answer this run (a turn started by messages); False for schedules,
    # background jobs, child agents and ad-hoc sessions (chat.ask tools decline at once).
    interactive: bool = False

    @property
    def tree_run_id(self) -> int | None:
        """The root run of the delegation tree this call belongs to."""
        return self.root_run_id if self.root_run_id is not None else self.run_id

    def require_services(self, unavailable: str) -> HostServices:
        """The daemon's services; without them (a context outside the daemon) a
        :class:`ToolError` with the message ``unavailable``."""
        if self.services is None:
            raise ToolError(unavailable)
        return self.services


ToolHandler = Callable[[ToolContext, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class HostTool:
    """One tool. Each tool module defines one ``TOOL``; its family lists them in ``TOOLS``.

    ``prefix`` is the capability prefix a persona's label must carry (``channel.send`` for
    ``channel.send:*``); several tools may share one (``persona.send``).
    ``scope_arg`` names the argument whose value the label's scope restricts
    (``channelId`` for ``channel.send:<name>``), or ``None`` when the scope is not an argument.
    """

    mcp_name: str
    internal_name: str
    prefix: str
    description: str
    input_schema: dict[str, Any]
    handler: ToolHandler
    timeout: float = 30.0
    scope_arg: str | None = None
    # Whether the tool can run on this host with these settings (bash needs bubblewrap, the
    # browser tools a Chromium); None: always. A tool that cannot is not offered at all.
    available: Callable[[Settings], bool] | None = None
    # Which runs are offered the tool: "any"; "children" (a run with a root run above it:
    # workspace_subscribe); "roots" (not child agents: procedure_write, since a child's
    # lessons are its parent's to keep).
    offered_to: Literal["any", "children", "roots"] = "any"
    # (argument, {value: prefix}): a call whose argument has one of these values needs that
    # prefix instead of ``prefix`` (web_scrape's ``mode: search`` needs ``web.search``); the tool
    # is listed to a persona holding any of its prefixes (gateway.labels decides).
    prefix_by_arg: tuple[str, Mapping[str, str]] | None = None
    # The call may wait for a human (ask_question): the agent loop checkpoints the run before it,
    # and the time waited does not count against the run's identity.
    waits_for_human: bool = False

    def offered_in(self, *, child: bool) -> bool:
        """Whether a run that is (``child``) or is not a child agent is offered this tool."""
        return self.offered_to == "any" or (self.offered_to == "children") == child
