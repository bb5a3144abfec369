"""The wiring: :func:`build_components` creates the parts, :class:`Gateway` starts and stops them.

Start: lock the data dir -> database (migrations; a cluster node joins) -> providers -> outbox recovery ->
inbound files left in staging moved into their workspaces -> host tools' bridge -> queue ->
scheduler -> connectors (each may fail alone; one that failed for now is retried in the
background) -> control socket -> HTTP server (when configured) -> persona MCP servers -> ready.
Stop: no new intake, control or HTTP connections -> scheduler -> channel retries -> running turns get the grace
period -> summarizer, persona MCP servers, host tools -> outbox flush -> control socket ->
connectors -> providers -> database -> unlock.

This is the one module of the core that names specific connectors and tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connectors.base import Connector, single_receiver
from connectors.console import ConsoleConnector
from gateway import otel
from gateway.channel_supervisor import ChannelSupervisor
from gateway.children.service import Children
from gateway.commands import ChatCommands
from gateway.config import ChannelSettings, ConfigError, Settings
from gateway.control import SOCKET_NAME, ControlServer
from gateway.data_dir import DataDirLock, prepare_data_dir
from gateway.dead_letters import DeadLetterOps
from gateway.delegation import Delegation
from gateway.events import EventBus
from gateway.heap import settle_heap
from gateway.host_tools import HostTools, ToolServices
from gateway.intake import Intake
from gateway.intake_limits import IntakeLimits, channel_limits
from gateway.interactions.approvals import ApprovalGate, unknown_tool_problems
from gateway.interactions.kinds import READINGS
from gateway.interactions.service import CheckpointHook, Interactions
from gateway.outbox import Outbox
from gateway.personas import Persona
from gateway.pipeline import Bindings, Pipeline
from gateway.poster import ChannelPoster
from gateway.queue import TurnQueue
from gateway.runtime.model import ModelProvider
from gateway.schedule_ops import ScheduleOps
from gateway.scheduler import Scheduler, record_result
from gateway.scheduling.outcomes import ScheduleHook, ScheduleNotifier
from gateway.status import StatusReporter
from gateway.store import readonly
from gateway.store.db import Database
from gateway.store.engines import open_store
from gateway.store.node_watch import watch_node_lock
from gateway.subagents.runner import SubagentRunner
from gateway.subagents.summarize import Summarizer
from gateway.turns import TurnRunner
from gateway.usage_report import usage_answer
from gateway.voice.service import Voice
from gateway.watchdog import SystemdNotifier
from tools.browser.manager import close_browser, warm_browser
from tools.schedules.shell_runner import ShellScheduleRunner

if TYPE_CHECKING:
    from gateway.cluster.node import ClusterNode
    from gateway.http.features import HttpFeature
    from gateway.http.server import HttpServer
    from gateway.persona_mcp.manager import PersonaMcpManager

__all__ = ["Components", "Gateway", "build_components", "build_connector", "run_daemon"]

log = logging.getLogger("talon.daemon")
CHANNEL_STOP_TIMEOUT = 10.0  # seconds one channel may take to disconnect at shutdown


def build_connector(
    settings: ChannelSettings, files_dir: Path, db: Database, public_url: str | None = None
) -> Connector:
    """Import only the platform libraries that are configured: start-up stays fast."""
    if settings.type == "console":
        return ConsoleConnector(settings.name, db)
    if settings.type == "telegram":
        from connectors.telegram import TelegramConnector

        return TelegramConnector(settings, files_dir=files_dir)
    if settings.type == "slack":
        from connectors.slack import SlackConnector

        return SlackConnector(settings, files_dir=files_dir)
    if settings.type == "web":
        from connectors.web import WebConnector

        return WebConnector(
            settings, files_dir=files_dir, db=db, data_path=files_dir.parent, public_url=public_url
        )
    from connectors.discord_bot import DiscordConnector

    return DiscordConnector(settings, files_dir=files_dir)


@dataclass(frozen=True, slots=True)
class Components:
    """Every part of the running gateway, created together by :func:`build_components`."""

    db: Database
    bus: EventBus
    bindings: Bindings
    providers: dict[str, ModelProvider]
    connectors: dict[str, Connector]
    outbox: Outbox
    poster: ChannelPoster
    persona_mcp: PersonaMcpManager | None
    tool_services: ToolServices
    host_tools: HostTools
    subagents: SubagentRunner
    summarizer: Summarizer | None
    delegation: Delegation
    turns: TurnRunner
    queue: TurnQueue
    scheduler: Scheduler
    pipeline: Pipeline
    intake: Intake
    channels: ChannelSupervisor
    status: StatusReporter
    control: ControlServer
    interactions: Interactions
    http: HttpServer | None = None


def build_components(settings: Settings, personas: Mapping[str, Persona], db: Database) -> Components:
    """Create every part on the open ``db``; nothing starts (:meth:`Gateway.start` does that)."""
    from gateway.runtime.providers import build_provider

    files = settings.data_path / "files"
    bus = EventBus()
    bindings = Bindings(
        settings.bindings, personas, {c.name: getattr(c, "session_scope", None) for c in settings.channels}
    )
    providers = {name: build_provider(name, p) for name, p in settings.providers.items()}
    subagents = SubagentRunner.from_settings(settings, providers, personas=personas)
    summarizer = (
        Summarizer(
            db,
            subagents,
            context_tokens=settings.agent.context_tokens,
            share=settings.subagents.summarize_share,
        )
        if settings.subagents.summarize
        else None
    )
    public_url = settings.http.public_url if settings.http is not None else None
    connectors = {ch.name: build_connector(ch, files, db, public_url) for ch in settings.channels}
    node = settings.database.cluster_node()
    outbox = Outbox(
        db, connectors, settings.outbox, node=node, claim_seconds=settings.database.failover_seconds
    )
    poster = ChannelPoster(db=db, settings=settings, connectors=connectors, outbox=outbox, bindings=bindings)
    persona_mcp = _persona_mcp(settings, personas)
    # The queue runs the turns that delegation follows: these close over it, built below.
    delegation = Delegation(
        db=db,
        settings=settings,
        personas=personas,
        notify=lambda thread_id: queue.notify(thread_id),
        park=lambda: queue.parked(),
        cancel_turn=lambda thread_id: queue.cancel(thread_id),
    )
    children = Children(db=db, settings=settings, providers=providers, delegation=delegation, bus=bus)
    interactions = Interactions(
        db, connectors, notice=poster.notice, park=lambda: queue.parked(), readings=READINGS, node=node
    )
    tool_services = ToolServices(poster, delegation, subagents, children, interactions)
    query_pools = [readonly.close_readonly_connections]
    if db.engine.name == "postgresql":
        from gateway.store.readonly_pg import close_pg_readonly_connections  # psycopg: PostgreSQL only

        query_pools.append(close_pg_readonly_connections)
    host_tools = HostTools(
        db=db,
        settings=settings,
        personas=personas,
        bindings=bindings,
        services=tool_services,
        mcp=persona_mcp,
        on_stop=[*query_pools, partial(close_browser, settings.data_path)],
    )
    children.attach(host_tools)
    gated = [(name, p.approvals) for name, p in personas.items()]
    problems = unknown_tool_problems(gated, (t.mcp_name for t in host_tools.bridge.tools))
    if problems:
        raise ConfigError(problems)
    host_tools.bridge.approvals = ApprovalGate(db, interactions, settings.secrets())
    schedule_notifier = ScheduleNotifier(poster)
    schedule_hook = ScheduleHook(db, schedule_notifier)
    turns = TurnRunner(
        db=db,
        settings=settings,
        personas=personas,
        providers=providers,
        connectors=connectors,
        outbox=outbox,
        poster=poster,
        bus=bus,
        tools=host_tools,
        schedule_results=partial(record_result, db),
        hooks=[delegation, children, schedule_hook, CheckpointHook(db)],
        summarizer=summarizer,
        voice=Voice(db=db, settings=settings, connectors=connectors, outbox=outbox),
    )
    queue = TurnQueue(db, settings.queue, turns, on_retry=schedule_hook.retrying, node=node)
    scheduler = Scheduler(
        db,
        default_timezone=settings.timezone,
        grace_seconds=settings.scheduler.grace_seconds,
        on_enqueued=queue.notify,
        personas=personas,
        shell=ShellScheduleRunner(db, settings, personas),
        notifier=schedule_notifier,
        # A cluster's schedules may be written on any node: the leader looks that often.
        **({"max_sleep": settings.database.heartbeat_seconds} if node else {}),
    )
    pipeline = Pipeline(
        db,
        bindings,
        limits=IntakeLimits(files, channel_limits(settings.channels)),
        on_queued=queue.notify,
        notice=poster.notice,
        workspaces_path=settings.workspaces_path,
    )
    commands = ChatCommands(
        db, cancel=queue.cancel, notice=poster.notice, usage=partial(usage_answer, db, settings)
    )
    intake = Intake(pipeline, commands, interactions)
    channels = ChannelSupervisor(connectors, intake, settings.channel_retry.backoff)
    status = StatusReporter(db, connectors, queue)
    control = ControlServer(
        settings.data_path / SOCKET_NAME,
        bus=bus,
        consoles={name: c for name, c in connectors.items() if isinstance(c, ConsoleConnector)},
        status=status,
        notifier=poster,
        personas=sorted(personas),
        extensions=[host_tools, DeadLetterOps(db, queue.notify), ScheduleOps(db)],
    )
    parts = Components(
        db=db,
        bus=bus,
        bindings=bindings,
        providers=providers,
        connectors=connectors,
        outbox=outbox,
        poster=poster,
        persona_mcp=persona_mcp,
        tool_services=tool_services,
        host_tools=host_tools,
        subagents=subagents,
        summarizer=summarizer,
        delegation=delegation,
        turns=turns,
        queue=queue,
        scheduler=scheduler,
        pipeline=pipeline,
        intake=intake,
        channels=channels,
        status=status,
        control=control,
        interactions=interactions,
    )
    return dataclasses.replace(parts, http=_http_server(settings, parts, personas))


def _http_server(settings: Settings, c: Components, personas: Mapping[str, Persona]) -> HttpServer | None:
    """The HTTP server with the features the config turns on; None without ``http:`` (aiohttp's
    server side is imported only then)."""
    if settings.http is None:
        return None
    from gateway.http.server import HttpServer

    unknown = [
        f"http.webhooks[{i}].persona: no persona named {r.persona!r}; use one of {', '.join(sorted(personas))}"
        for i, r in enumerate(settings.http.webhooks)
        if r.persona not in personas
    ]
    if unknown:
        raise ConfigError(unknown)

    return HttpServer(settings.http, _http_features(settings, c, personas), data_path=settings.data_path)


def _http_features(settings: Settings, c: Components, personas: Mapping[str, Persona]) -> list[HttpFeature]:
    """Every feature of the HTTP server, in the order their routes are added."""
    from gateway.http.features import HttpFeature
    from gateway.http.metrics import MetricsFeature

    http = settings.http
    assert http is not None
    features: list[HttpFeature] = []
    if http.metrics:
        features.append(
            MetricsFeature(c.db, c.connectors, token=http.metrics_token, timezone=settings.timezone)
        )
    if settings.console is not None:
        from gateway.http.console.feature import ConsoleDeps, ConsoleFeature

        features.append(
            ConsoleFeature(
                ConsoleDeps(
                    db=c.db, settings=settings, personas=personas, status=c.status, notify=c.queue.notify
                )
            )
        )
    # A channel served over HTTP (type: web) is a feature too: it adds its own routes.
    features += [ch for ch in c.connectors.values() if isinstance(ch, HttpFeature)]
    if http.webhooks:
        from gateway.http.webhooks import WebhooksFeature

        features.append(WebhooksFeature(http.webhooks, c.intake))
    return features


def _persona_mcp(settings: Settings, personas: Mapping[str, Persona]) -> PersonaMcpManager | None:
    """Persona MCP servers, when any persona declares one (the mcp client loads only then)."""
    if not any(p.mcp_servers for p in personas.values()):
        return None
    from gateway.persona_mcp.manager import PersonaMcpManager

    return PersonaMcpManager(settings, personas)


class Gateway:
    """The running daemon: starts the parts in order, stops them in reverse.

    Args:
        settings (:class:`gateway.config.Settings`): The loaded ``talon.yaml``.
        personas (Mapping[:obj:`str`, :class:`gateway.personas.Persona`]): The loaded personas.
    """

    def __init__(self, settings: Settings, personas: Mapping[str, Persona]):
        self.settings = settings
        self.personas = personas
        self._lock = DataDirLock(prepare_data_dir(settings))
        self._components: Components | None = None
        self._stopped = asyncio.Event()
        self._scheduler_task: asyncio.Task[None] | None = None
        self._warm_up: list[asyncio.Task[Any]] = []
        self._node_watch: asyncio.Task[None] | None = None
        self._cluster: ClusterNode | None = None
        self.lost_database = False  # the node lock's connection went away: exit non-zero

    @property
    def components(self) -> Components:
        """The parts, from :meth:`start` on.

        Raises:
            RuntimeError: The gateway has not started.
        """
        if self._components is None:
            raise RuntimeError("the gateway has not started")
        return self._components

    # ------------------------------------------------------------ start

    async def start(self) -> None:
        """Start in order; on any failure, stop what started and raise."""
        self._lock.acquire()
        try:
            database = self.settings.database
            db = await open_store(
                database.url,
                self.settings.data_path,
                node=True,
                standby_poll=database.standby_poll if database.standby else None,
                cluster=database.cluster,
            )
            try:
                if database.cluster:
                    self._cluster = await self._join_cluster(db)
                self._components = build_components(self.settings, self.personas, db)
            except BaseException:
                await db.close()
                raise
            await self._start_parts(self._components)
        except BaseException:
            await self.close()
            raise

    async def _join_cluster(self, db: Database) -> ClusterNode:
        """Join as a cluster node, before anything leases or sends; one role per single-receiver
        channel (a bot's Telegram poller) and the scheduler are taken in turn from here."""
        from gateway.cluster.node import ClusterNode  # psycopg's listener: loaded only for a cluster

        node = ClusterNode(
            db,
            self.settings.database,
            max_attempts=self.settings.queue.max_attempts,
            on_lost=self._lose_database,
            workspaces_path=self.settings.workspaces_path,
        )
        await node.join()
        return node

    def _roles(self, c: Components) -> None:
        assert self._cluster is not None
        for name, connector in c.connectors.items():
            if single_receiver(connector):
                connector.receive_gate = self._cluster.role(f"channel:{name}")  # type: ignore[attr-defined]
        # A bot's channel-wide send rate is the platform's limit over every node sending for it.
        pacers = [
            pacer for connector in c.connectors.values() if (pacer := getattr(connector, "pacer", None))
        ]
        self._cluster.on_members(lambda nodes: [pacer.share(nodes) for pacer in pacers])
        c.status.cluster = self._cluster

    async def _run_scheduler(self, c: Components) -> None:
        """The scheduler; in a cluster, on one node at a time (it waits for the role)."""
        if self._cluster is not None:
            leader = asyncio.create_task(self._cluster.role("scheduler").wait())
            stopped = asyncio.create_task(self._stopped.wait())
            await asyncio.wait({leader, stopped}, return_when=asyncio.FIRST_COMPLETED)
            for task in (leader, stopped):
                task.cancel()
            if self._stopped.is_set():
                return
        await c.scheduler.run(self._stopped)

    async def _start_parts(self, c: Components) -> None:
        if self._cluster is not None:
            self._roles(c)
        await c.outbox.recover()
        await c.pipeline.recover()  # before the queue: a turn must find its inbound files in place
        await c.host_tools.start()  # before the queue: turns and MCP sessions need the bridge
        await c.queue.start()
        if self._cluster is not None:
            self._cluster.start(c.queue, c.outbox, c.interactions)
        self._scheduler_task = asyncio.create_task(self._run_scheduler(c), name="scheduler")
        if c.db.engine.name == "postgresql":
            self._node_watch = asyncio.create_task(
                watch_node_lock(c.db, self._lose_database), name="node-lock"
            )
        await c.interactions.start()  # before the channels: a tap may arrive at once
        await c.channels.start()  # a channel that fails for now is retried in the background
        await c.control.start()
        if c.http is not None:
            await c.http.start()
        if c.persona_mcp is not None:
            await c.persona_mcp.start()  # returns at once; servers start in the background
        # Import the SDKs the personas use now, off the loop, so the first turn doesn't wait.
        used = {p.provider for p in self.personas.values()}
        self._warm_up = [asyncio.create_task(c.providers[name].warm_up()) for name in used]
        # Chromium and a spare tab, so a thread's first browser_open does not start them.
        self._warm_up.append(asyncio.create_task(warm_browser(self.settings, self.personas)))
        log.info(
            "talon ready: %d channels, %d personas, data in %s",
            len(c.connectors),
            len(self.personas),
            self.settings.data_path,
        )

    async def warmed_up(self) -> None:
        """Returns when the model SDKs the personas use are imported (and Chromium is up)."""
        await asyncio.gather(*self._warm_up, return_exceptions=True)

    # ------------------------------------------------------------ stop

    def request_stop(self) -> None:
        self._stopped.set()

    def _lose_database(self) -> None:
        self.lost_database = True
        self.request_stop()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def close(self) -> None:
        """Stop intake, let running turns finish (or release them), flush, disconnect."""
        c = self._components
        if c is not None:
            c.intake.close()
            c.control.stop_listening()
            if c.http is not None:
                await c.http.stop()  # webhooks are intake: none after this
        self._stopped.set()
        if self._node_watch is not None:
            self._node_watch.cancel()
            await asyncio.gather(self._node_watch, return_exceptions=True)
        if self._scheduler_task:
            await asyncio.gather(self._scheduler_task, return_exceptions=True)
        if self._cluster is not None:
            await self._cluster.stop()
        if c is not None:
            await self._close_parts(c, self._cluster)
        self._lock.release()

    async def _close_parts(self, c: Components, cluster: ClusterNode | None) -> None:
        await c.channels.stop()  # no channel starts again while the rest stops
        await c.queue.stop(self.settings.shutdown_grace)
        if c.turns.voice is not None:
            await c.turns.voice.close()
        if c.summarizer is not None:
            await c.summarizer.aclose()
        if c.persona_mcp is not None:
            await c.persona_mcp.stop()
        await c.host_tools.stop()  # after the turns, before the outbox's last flush
        if not await c.outbox.flush(max(1.0, self.settings.shutdown_grace)):
            log.warning("outbox not fully flushed; the rest is delivered after the next start")
        await c.outbox.close()
        await c.control.stop()
        await asyncio.gather(*(_stop_channel(connector) for connector in c.connectors.values()))
        await self.warmed_up()
        for provider in c.providers.values():
            with contextlib.suppress(Exception):
                await provider.aclose()
        if cluster is not None and not self.lost_database:
            await cluster.leave()
        await c.db.close()


async def _stop_channel(connector: Connector) -> None:
    """Disconnect one channel; one that does not stop in time is left behind, not waited on."""
    try:
        async with asyncio.timeout(CHANNEL_STOP_TIMEOUT):
            await connector.stop()
    except TimeoutError:
        log.warning(
            "channel %s did not stop within %g s; shutting down without it",
            connector.name,
            CHANNEL_STOP_TIMEOUT,
        )
    except Exception:
        log.warning("channel %s failed while stopping", connector.name, exc_info=True)


async def run_daemon(settings: Settings, personas: dict[str, Persona]) -> int:
    """``talon run``: start, serve until SIGINT/SIGTERM, stop in order. Returns the exit code."""
    gateway = Gateway(settings, personas)
    otel.install(settings.traces)  # spans only when traces.otlp_endpoint is set
    try:
        await gateway.start()
    except BaseException:
        await otel.shutdown()
        raise
    settled = asyncio.create_task(_settle_when_warm(gateway), name="settle-heap")
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, gateway.request_stop)
    systemd = SystemdNotifier.from_environ()
    pinging: asyncio.Task[None] | None = None
    if systemd is not None:
        systemd.notify("READY=1\nSTATUS=ready")
        pinging = asyncio.create_task(systemd.ping_forever(), name="systemd-watchdog")
    try:
        await gateway.wait_stopped()
        log.info("stopping: no new messages; running turns get %.0fs", settings.shutdown_grace)
    finally:
        if systemd is not None:
            systemd.notify("STOPPING=1")
        settled.cancel()
        try:
            await gateway.close()  # still pinging: a shutdown that hangs the loop gets killed too
        finally:
            if pinging is not None:
                pinging.cancel()
            await otel.shutdown()  # the last spans, after the last sends
    log.info("stopped")
    return 1 if gateway.lost_database else 0


async def _settle_when_warm(gateway: Gateway) -> None:
    await gateway.warmed_up()
    settle_heap()
