"""The parts of the gateway: :func:`build_components` creates every one of them on an open
database, nothing started (:class:`gateway.daemon.Gateway` starts and stops them).

This and :mod:`gateway.daemon` are the modules of the core that name specific connectors and tools.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from connectors.base import Connector
from connectors.console import ConsoleConnector
from gateway.channel_supervisor import ChannelSupervisor
from gateway.children.service import Children
from gateway.commands import ChatCommands
from gateway.config import ChannelSettings, ConfigError, Settings
from gateway.control import SOCKET_NAME, ControlServer
from gateway.dead_letters import DeadLetterOps
from gateway.delegation import Delegation
from gateway.events import EventBus
from gateway.host_tools import HostTools, ToolServices
from gateway.intake import Intake
from gateway.intake_limits import IntakeLimits, channel_limits
from gateway.interactions.approvals import ApprovalGate, unknown_tool_problems
from gateway.interactions.kinds import READINGS
from gateway.interactions.service import Interactions
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
from gateway.subagents.runner import SubagentRunner
from gateway.subagents.summarize import Summarizer
from gateway.turns import TurnRunner
from gateway.usage_report import usage_answer
from gateway.voice.service import Voice
from tools.browser.manager import close_browser
from tools.schedules.shell_runner import ShellScheduleRunner

if TYPE_CHECKING:
    from gateway.http.features import HttpFeature
    from gateway.http.server import HttpServer
    from gateway.persona_mcp.manager import PersonaMcpManager

__all__ = ["Components", "build_components", "build_connector"]


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
        hooks=[delegation, children, schedule_hook],
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
