"""The host tools inside the daemon: bridge, bridge socket, per-turn toolboxes, MCP sessions.

:class:`HostTools` is what :func:`gateway.components.build_components` wires:

- as the turn runner's ``TurnTools``: :meth:`HostTools.toolbox` registers the run's
  identity with the bridge and returns the turn's :class:`RunToolBox` (calls go straight to
  :meth:`tools.bridge.Bridge.call`, no socket hop); :meth:`HostTools.instructions` gives
  the persona's tool instruction texts for the system prompt;
- as the bridge socket's owner (``<data_dir>/bridge.sock``) for ``talon mcp host-tools``;
- as the handler of the control op ``host_tools_session``: an ad-hoc MCP session for a
  persona on a thread, alive while the control connection stays open.

:class:`ToolServices` is what the tools may ask of the daemon beyond the database.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connectors.base import ThreadKey
from gateway.children.steering import SteeredToolBox
from gateway.config import Settings
from gateway.control import Reply
from gateway.errors import RefusedError
from gateway.personas import Persona
from gateway.pipeline import Bindings
from gateway.runtime.agent import ToolBox, ToolOutcome
from gateway.runtime.model import ToolCall, ToolSpec
from gateway.store.db import Database
from gateway.store.runs import end_run, end_sessions, start_run
from gateway.store.threads import get_thread, upsert_thread
from tools.base import HostServices, HostTool
from tools.bridge import Bridge, RunIdentity
from tools.bridge_server import SOCKET_NAME, BridgeServer
from tools.instruction_files import ToolInstructions
from tools.status_labels import StatusLabels

if TYPE_CHECKING:
    from gateway.budgets import RunBudget
    from gateway.children.service import Children
    from gateway.delegation import Delegation
    from gateway.interactions.service import Interactions
    from gateway.persona_mcp.manager import PersonaMcpManager
    from gateway.poster import ChannelPoster
    from gateway.subagents.runner import SubagentRunner
    from gateway.tracing import RunTrace

__all__ = ["SESSION_OP", "HostTools", "RunToolBox", "SessionError", "ToolServices"]

log = logging.getLogger("talon.host_tools")

SESSION_OP = "host_tools_session"
HEARTBEAT_SECONDS = 1.0
# A turn's identity outlives a turn that never released it by at most this much.
_TURN_GRACE = 60.0
# At stop, how long a session's client gets to hang up after being told the session ended.
_SESSION_GOODBYE = 2.0
_GOODBYE_POLL = 0.02


class SessionError(RefusedError):
    """An ad-hoc session cannot be opened; the message says what to change."""


@dataclass(frozen=True, slots=True)
class ToolServices:
    """What host tools may ask of the daemon (:class:`tools.base.HostServices`): posting into
    a channel, the delegation service the persona tools reach, the sub-agent runner
    ``subagent_invoke`` reaches and the child-agent service of ``agent`` and ``compose``."""

    poster: ChannelPoster
    delegation: Delegation
    subagents: SubagentRunner
    children: Children
    interactions: Interactions | None = None  # questions and approvals (gateway.interactions)

    async def send_to_channel(self, **kwargs: Any) -> dict[str, Any]:
        return await self.poster.send_to_channel(**kwargs)


class RunToolBox:
    """The host tools of one turn (:class:`gateway.runtime.agent.ToolBox`).

    Its identity stays registered until :meth:`close` (also on leaving a ``with`` block,
    or when the toolbox is garbage-collected).
    """

    def __init__(self, bridge: Bridge, identity: RunIdentity, socket_path: Path):
        self.bridge = bridge
        self.identity = identity
        self.socket_path = socket_path
        self._specs = tuple(
            ToolSpec(t.mcp_name, t.description, t.input_schema) for t in bridge.tools_for(identity)
        )
        self._finalizer = weakref.finalize(self, _release, bridge, identity)

    def specs(self) -> Sequence[ToolSpec]:
        return self._specs

    def may_wait(self, call: ToolCall) -> bool:
        """The call may wait for a human: the agent loop checkpoints the run before it."""
        return self.bridge.may_wait(self.identity, call.name)

    async def call(self, call: ToolCall) -> ToolOutcome:
        result = await self.bridge.call(self.identity, call.name, call.arguments, call_id=call.id)
        return ToolOutcome(
            result.content,
            is_error=result.is_error,
            images=result.images,
            refused=result.refused,
            error_class=result.error_class,
        )

    def environment(self) -> dict[str, str]:
        """The environment that lets ``talon mcp host-tools`` act as this turn."""
        return self.identity.environment(self.socket_path)

    def close(self) -> None:
        """End the identity: its secret stops working."""
        self._finalizer()

    def __enter__(self) -> RunToolBox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _release(bridge: Bridge, identity: RunIdentity) -> None:
    if bridge.active(identity):
        bridge.unregister(identity.run_id)


class HostTools:
    """Host tools for the running daemon.

    Args:
        db (:class:`gateway.store.db.Database`): The daemon's database.
        settings (:class:`gateway.config.Settings`): The daemon's settings.
        personas (Mapping[:obj:`str`, :class:`gateway.personas.Persona`]): Loaded personas.
        bindings (:class:`gateway.pipeline.Bindings`): Binds a new console thread to its persona.
        services (:class:`tools.base.HostServices`): What tools may ask of the daemon.
        tools (Sequence[:class:`tools.base.HostTool`], optional): Defaults to the registry's.
        heartbeat (:obj:`float`, optional): Seconds between session heartbeats; a failed one
            (the client went away) ends the session.
        on_stop (Sequence[Callable[[], Awaitable[None]]], optional): Awaited last in
            :meth:`stop`: the tools' own shutdown (connections whose threads would keep the
            process alive), handed in by the wiring.
    """

    def __init__(
        self,
        *,
        db: Database,
        settings: Settings,
        personas: Mapping[str, Persona],
        bindings: Bindings,
        services: HostServices | None,
        tools: Sequence[HostTool] | None = None,
        heartbeat: float = HEARTBEAT_SECONDS,
        mcp: PersonaMcpManager | None = None,
        on_stop: Sequence[Callable[[], Awaitable[None]]] = (),
    ):
        self.db = db
        self.settings = settings
        self.personas = personas
        self.bindings = bindings
        self.heartbeat = heartbeat
        self.mcp = mcp
        self.on_stop = tuple(on_stop)
        self.bridge = Bridge(db=db, settings=settings, personas=personas, services=services, tools=tools)
        self._instructions = ToolInstructions.load(settings.config_dir, self.bridge.tools)
        self._status_labels = StatusLabels.load(settings.config_dir, self.bridge.tools)
        self.socket_path = settings.data_path / SOCKET_NAME
        self.server = BridgeServer(self.socket_path, self.bridge, instructions=self._persona_instructions)
        self._closing = asyncio.Event()
        self._sessions: set[asyncio.Future[None]] = set()

    async def start(self) -> None:
        """Close sessions a crash left open, then listen on the bridge socket."""
        await self.db.run_transaction(end_sessions, time.time(), self.settings.database.cluster_node())
        await self.server.start()

    async def stop(self) -> None:
        """End open sessions (their clients are told and disconnect), close the bridge socket."""
        self._closing.set()
        if self._sessions:
            await asyncio.wait(self._sessions, timeout=_SESSION_GOODBYE + 1)
        await self.server.stop()
        await self.bridge.audit.flush()
        for hook in self.on_stop:
            await hook()

    # ------------------------------------------------------------ TurnTools

    def toolbox(
        self,
        persona: Persona,
        thread_id: int,
        run_id: int,
        *,
        sender_id: str | None = None,
        budget: RunBudget | None = None,
        trace: RunTrace | None = None,
        depth: int = 0,
        root_run_id: int | None = None,
        interactive: bool = False,
    ) -> ToolBox:
        """Register the turn's identity (answering ``sender_id``, if one, under the root run's
        ``budget`` and recording into its ``trace``) and return its tools.

        A child agent's identity carries its ``depth`` and ``root_run_id``; a background
        child's turn (on its own thread) gets them from the child service, and its toolbox
        takes the steering messages sent to it at each tool-call boundary."""
        services = self.bridge.services
        children = services.children if services is not None else None
        lineage = children.lineage_of(thread_id) if children is not None and depth == 0 else None
        if lineage is not None:
            depth, root_run_id = lineage.depth, lineage.root_run_id
        identity = self.bridge.register(
            run_id,
            thread_id,
            persona.name,
            ttl=self.settings.agent.turn_timeout + _TURN_GRACE,
            as_persona=persona,
            sender_id=sender_id,
            budget=budget,
            trace=trace,
            depth=depth,
            root_run_id=root_run_id,
            interactive=interactive and lineage is None and depth == 0,
        )
        box = RunToolBox(self.bridge, identity, self.socket_path)
        tools: ToolBox = box
        if self.mcp is not None and persona.mcp_servers:
            from gateway.persona_mcp.toolbox import ComposedToolBox  # the mcp client loads only when used

            tools = ComposedToolBox(box, self.mcp, persona, self.mcp.cached_specs(persona))
        if lineage is not None and children is not None:
            tools = SteeredToolBox(tools, partial(children.steering, thread_id))
        return tools

    def instructions(self, persona: Persona) -> Sequence[str]:
        """Instruction texts of the tools ``persona`` may use, each once."""
        return self._instructions.for_labels(persona.capabilities)

    def status_label(self, tool: str, overrides: Mapping[str, str] | None = None) -> str:
        """What the chat shows while ``tool`` runs (tools/status_labels.py)."""
        return self._status_labels.label(tool, overrides)

    def release(self, run_id: int) -> None:
        """The turn ended: its identity stops working."""
        self.bridge.unregister(run_id)

    def _persona_instructions(self, name: str) -> Sequence[str]:
        persona = self.personas.get(name)
        return self.instructions(persona) if persona is not None else ()

    # ------------------------------------------------------------ sessions

    async def handle_control(self, request: dict[str, Any], reply: Reply) -> bool:
        """Serve the ``host_tools_session`` control op; ``False`` for any other op.

        Replies ``{"type": "session", run_id, secret, thread_id, persona, socket}``, then a
        ``{"type": "heartbeat"}`` line every :attr:`heartbeat` seconds until the client
        disconnects, which ends the session. When the daemon stops, a final
        ``{"type": "error"}`` line tells the client the session is over.
        """
        if request.get("op") != SESSION_OP:
            return False
        persona, thread = request.get("persona"), request.get("thread")
        try:
            identity = await self.open_session(
                persona if isinstance(persona, str) and persona else None,
                str(thread) if thread not in (None, "") else None,
            )
        except SessionError as exc:
            await reply({"type": "error", "error": str(exc)})
            return True
        log.info(
            "host-tools session %s opened for %s on thread %s",
            identity.run_id,
            identity.persona,
            identity.thread_id,
        )
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sessions.add(ended)
        try:
            await reply(
                {
                    "type": "session",
                    "run_id": identity.run_id,
                    "secret": identity.secret,
                    "thread_id": identity.thread_id,
                    "persona": identity.persona,
                    "socket": str(self.socket_path),
                }
            )
            while not self._closing.is_set():
                try:
                    async with asyncio.timeout(self.heartbeat):
                        await self._closing.wait()
                except TimeoutError:
                    await reply({"type": "heartbeat"})  # fails once the client is gone
            await reply({"type": "error", "error": "the daemon is stopping; the host-tools session ended"})
            # Wait for the client to hang up, so the control server's read sees the end of
            # the connection instead of being cancelled mid-read.
            deadline = asyncio.get_running_loop().time() + _SESSION_GOODBYE
            while asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(_GOODBYE_POLL)
                await reply({"type": "heartbeat"})
        except (ConnectionError, OSError):
            pass
        finally:
            try:
                await asyncio.shield(self.close_session(identity))
            finally:
                self._sessions.discard(ended)
                ended.set_result(None)
        return True

    async def open_session(self, persona: str | None, thread: str | None) -> RunIdentity:
        """Register an ad-hoc identity: a ``runs`` row with status ``session``.

        Args:
            persona (:obj:`str` | :obj:`None`): The persona; defaults to the thread's.
            thread (:obj:`str` | :obj:`None`): A thread id as ``talon threads`` prints it, or a
                console thread name (created when new, bound per the console binding);
                defaults to the console thread ``main``.

        Raises:
            :class:`SessionError`
        """
        thread_id, bound = await self._session_thread(thread or "main")
        name = persona or bound
        if name is None:
            raise SessionError(f"thread {thread_id} has no persona; pass --persona NAME")
        if name not in self.personas:
            raise SessionError(f"no persona named {name!r}; loaded: {', '.join(self.personas) or '(none)'}")
        run_id = await self.db.run_transaction(
            start_run, thread_id, name, "mcp-session", time.time(), status="session"
        )
        return self.bridge.register(run_id, thread_id, name)

    async def close_session(self, identity: RunIdentity) -> None:
        self.bridge.unregister(identity.run_id)
        try:
            await self.db.run_transaction(end_run, identity.run_id, "ended", None, time.time())
        except Exception:  # the daemon may be closing its database; the next start cleans up
            log.warning("could not mark session run %s ended", identity.run_id)
        log.info("host-tools session %s ended", identity.run_id)

    async def _session_thread(self, thread: str) -> tuple[int, str | None]:
        if thread.isdigit():
            row = await self.db.read(get_thread, int(thread))
            if row is None:
                raise SessionError(f"no thread with id {thread}; `talon threads` lists them")
            return row.id, row.persona
        console = next((c for c in self.settings.channels if c.type == "console"), None)
        if console is None:
            raise SessionError(
                f"{thread!r} is not a thread id and no console channel is configured for named threads; "
                "pass a thread id from `talon threads`"
            )
        bound = self.bindings.resolve(console.name, thread)
        row = await self.db.run_transaction(
            upsert_thread, ThreadKey(console.name, thread), chat_type="dm", persona=bound, now=time.time()
        )
        return row.id, row.persona
