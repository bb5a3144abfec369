"""Wires the parts together; owns the start and stop order.

Start: lock the data dir -> database (migrations) -> providers -> outbox recovery ->
queue -> connectors (each may fail alone) -> control socket -> ready.
Stop: control socket -> connectors (no new intake) -> running turns get the grace period
-> outbox flush -> close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from connectors.base import Connector, ConnectorStartError
from connectors.console import ConsoleConnector
from gateway.commands import ChatCommands
from gateway.config import ChannelSettings, Settings
from gateway.control import SOCKET_NAME, ControlServer, Reply
from gateway.data_dir import DataDirLock, prepare_data_dir
from gateway.delegation import Delegation
from gateway.events import EventBus
from gateway.heap import settle_heap
from gateway.host_tools import HostTools
from gateway.intake import Intake
from gateway.intake_limits import IntakeLimits, channel_limits
from gateway.outbox import Outbox
from gateway.personas import Persona
from gateway.pipeline import Bindings, Pipeline
from gateway.poster import ChannelPoster
from gateway.queue import TurnQueue
from gateway.runtime.model import ModelProvider
from gateway.scheduler import Scheduler, record_result
from gateway.status import StatusReport, StatusReporter
from gateway.store.db import DB_FILE, Database, open_database
from gateway.subagents.runner import SubagentRunner
from gateway.subagents.summarize import Summarizer
from gateway.turns import TurnRunner

log = logging.getLogger("talon.daemon")


def build_connector(settings: ChannelSettings, files_dir: Path) -> Connector:
    """Import only the platform libraries that are configured: start-up stays fast."""
    if settings.type == "console":
        return ConsoleConnector(settings.name)
    if settings.type == "telegram":
        from connectors.telegram import TelegramConnector

        return TelegramConnector(settings, files_dir=files_dir)
    if settings.type == "slack":
        from connectors.slack import SlackConnector

        return SlackConnector(settings, files_dir=files_dir)
    from connectors.discord_bot import DiscordConnector

    return DiscordConnector(settings, files_dir=files_dir)


@dataclass(frozen=True, slots=True)
class ToolServices:
    """What host tools may ask of the daemon (:class:`tools.base.HostServices`): posting into
    a channel, the delegation service the persona tools reach and the sub-agent runner
    ``subagent_invoke`` reaches."""

    poster: ChannelPoster
    delegation: Delegation
    subagents: SubagentRunner

    async def send_to_channel(self, **kwargs: Any) -> dict[str, Any]:
        return await self.poster.send_to_channel(**kwargs)


class Gateway:
    """The running daemon."""

    def __init__(self, settings: Settings, personas: dict[str, Persona]):
        self.settings = settings
        self.personas = personas
        self.bus = EventBus()
        self.bindings = Bindings(settings.bindings, personas)
        self.connectors: dict[str, Connector] = {}
        self.providers: dict[str, ModelProvider] = {}
        self.db: Database | None = None
        self._lock = DataDirLock(prepare_data_dir(settings))
        self._control: ControlServer | None = None
        self._stopped = asyncio.Event()
        self._scheduler_task: asyncio.Task[None] | None = None
        self.host_tools: HostTools | None = None
        self._warm_up: list[asyncio.Task[Any]] = []
        self.summarizer: Summarizer | None = None
        self.persona_mcp: Any = None

    # ------------------------------------------------------------ start

    async def start(self) -> None:
        data = self.settings.data_path
        self._lock.acquire()
        try:
            await self._start_core(data)
        except BaseException:
            await self.close()
            raise

    async def _start_core(self, data: Path) -> None:
        from gateway.runtime.providers import build_provider

        self.db = await open_database(data / DB_FILE)
        self.providers = {name: build_provider(name, p) for name, p in self.settings.providers.items()}
        used = {p.provider for p in self.personas.values()}
        self.subagents = SubagentRunner.from_settings(self.settings, self.providers, personas=self.personas)
        self.summarizer = (
            Summarizer(
                self.db,
                self.subagents,
                context_tokens=self.settings.agent.context_tokens,
                share=self.settings.subagents.summarize_share,
            )
            if self.settings.subagents.summarize
            else None
        )
        for ch in self.settings.channels:
            self.connectors[ch.name] = build_connector(ch, data / "files")
        self.outbox = Outbox(self.db, self.connectors, self.settings.outbox)
        self.poster = ChannelPoster(
            db=self.db,
            settings=self.settings,
            connectors=self.connectors,
            outbox=self.outbox,
            bindings=self.bindings,
        )
        self.delegation = Delegation(
            db=self.db,
            settings=self.settings,
            personas=self.personas,
            notify=lambda thread_id: self.queue.notify(thread_id),
            park=lambda: self.queue.parked(),
            cancel_turn=lambda thread_id: self.queue.cancel(thread_id),
        )
        self.persona_mcp = self._persona_mcp()
        self.host_tools = HostTools(
            db=self.db,
            settings=self.settings,
            personas=self.personas,
            bindings=self.bindings,
            services=ToolServices(self.poster, self.delegation, self.subagents),
            mcp=self.persona_mcp,
        )
        self.turns = TurnRunner(
            db=self.db,
            settings=self.settings,
            personas=self.personas,
            providers=self.providers,
            connectors=self.connectors,
            outbox=self.outbox,
            poster=self.poster,
            bus=self.bus,
            tools=self.host_tools,
            schedule_results=partial(record_result, self.db),
            hooks=[self.delegation],
            summarizer=self.summarizer,
        )
        self.queue = TurnQueue(self.db, self.settings.queue, self.turns)
        self.scheduler = Scheduler(
            self.db,
            default_timezone=self.settings.timezone,
            grace_seconds=self.settings.scheduler.grace_seconds,
            on_enqueued=self.queue.notify,
            personas=self.personas,
        )
        self.pipeline = Pipeline(
            self.db,
            self.bindings,
            limits=IntakeLimits(data / "files", channel_limits(self.settings.channels)),
            on_queued=self.queue.notify,
            notice=self.poster.notice,
        )
        self.commands = ChatCommands(self.db, cancel=self.queue.cancel, notice=self.poster.notice)
        self.intake = Intake(self.pipeline, self.commands)
        self.status_reporter = StatusReporter(self.db, self.connectors, self.queue)
        await self.outbox.recover()
        await self.host_tools.start()  # before the queue: turns and MCP sessions need the bridge
        await self.queue.start()
        self._scheduler_task = asyncio.create_task(self.scheduler.run(self._stopped), name="scheduler")
        await asyncio.gather(*(self._start_connector(c) for c in self.connectors.values()))
        self._control = ControlServer(data / SOCKET_NAME, self)
        await self._control.start()
        if self.persona_mcp is not None:
            await self.persona_mcp.start()  # returns at once; servers start in the background
        # Import the SDKs the personas use now, off the loop, so the first turn doesn't wait.
        self._warm_up = [asyncio.create_task(self.providers[name].warm_up()) for name in used]
        log.info(
            "talon ready: %d channels, %d personas, data in %s",
            len(self.connectors),
            len(self.personas),
            data,
        )

    async def warmed_up(self) -> None:
        """Returns when the model SDKs the personas use are imported."""
        await asyncio.gather(*self._warm_up, return_exceptions=True)

    def _persona_mcp(self) -> Any:
        """Persona MCP servers, when any persona declares one (the mcp client loads only then)."""
        if not any(p.mcp_servers for p in self.personas.values()):
            return None
        from gateway.persona_mcp import PersonaMcpManager

        return PersonaMcpManager(self.settings, self.personas)

    async def _start_connector(self, connector: Connector) -> None:
        try:
            await connector.start(self.intake)
        except ConnectorStartError as exc:
            connector.health.set("failed", str(exc))
            log.error("channel %s did not start: %s", connector.name, exc)
        except Exception as exc:
            connector.health.set("failed", f"{type(exc).__name__}: {exc}")
            log.exception("channel %s did not start", connector.name)

    # ------------------------------------------------------------ control target

    def console(self, name: str | None) -> ConsoleConnector | None:
        for connector in self.connectors.values():
            if isinstance(connector, ConsoleConnector) and (name is None or connector.name == name):
                return connector
        return None

    async def status(self) -> StatusReport:
        return await self.status_reporter.report()

    async def send_notification(self, channel: str, chat: str | None, text: str) -> dict[str, Any]:
        """ControlTarget: ``talon send`` (:meth:`gateway.poster.ChannelPoster.notify`)."""
        posted = await self.poster.notify(channel, chat, text)
        return {"ok": True, "thread_id": posted.thread_id, "chunks": len(posted.outbox_ids)}

    async def handle_extra(self, request: dict[str, Any], reply: Reply) -> bool:
        if self.host_tools is None:
            return False
        return await self.host_tools.handle_control(request, reply)

    # ------------------------------------------------------------ stop

    def request_stop(self) -> None:
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def close(self) -> None:
        """Stop intake, let running turns finish (or release them), flush, disconnect."""
        if hasattr(self, "intake"):
            self.intake.close()
        if self._control:
            self._control.stop_listening()
        self._stopped.set()
        if self._scheduler_task:
            await asyncio.gather(self._scheduler_task, return_exceptions=True)
        if hasattr(self, "queue"):
            await self.queue.stop(self.settings.shutdown_grace)
        if self.summarizer is not None:
            await self.summarizer.aclose()
        if self.persona_mcp is not None:
            await self.persona_mcp.stop()
        if self.host_tools is not None:
            await self.host_tools.stop()  # after the turns, before the outbox's last flush
        if hasattr(self, "outbox"):
            if not await self.outbox.flush(max(1.0, self.settings.shutdown_grace)):
                log.warning("outbox not fully flushed; the rest is delivered after the next start")
            await self.outbox.close()
        if self._control:
            await self._control.stop()
        for connector in self.connectors.values():
            with contextlib.suppress(Exception):
                await connector.stop()
        await self.warmed_up()
        for provider in self.providers.values():
            with contextlib.suppress(Exception):
                await provider.aclose()
        if self.db:
            await self.db.close()
            self.db = None
        self._lock.release()


async def run_daemon(settings: Settings, personas: dict[str, Persona]) -> int:
    """``talon run``: start, serve until SIGINT/SIGTERM, stop in order. Returns the exit code."""
    gateway = Gateway(settings, personas)
    await gateway.start()
    settled = asyncio.create_task(_settle_when_warm(gateway), name="settle-heap")
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, gateway.request_stop)
    try:
        await gateway.wait_stopped()
        log.info("stopping: no new messages; running turns get %.0fs", settings.shutdown_grace)
    finally:
        settled.cancel()
        await gateway.close()
    log.info("stopped")
    return 0


async def _settle_when_warm(gateway: Gateway) -> None:
    await gateway.warmed_up()
    settle_heap()
