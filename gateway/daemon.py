"""The daemon: :class:`Gateway` starts the parts :func:`gateway.components.build_components`
created, and stops them.

Start: lock the data dir -> database (migrations; a cluster node joins) -> providers -> outbox recovery ->
inbound files left in staging moved into their workspaces -> host tools' bridge -> queue ->
scheduler -> connectors (each may fail alone; one that failed for now is retried in the
background) -> control socket -> HTTP server (when configured) -> persona MCP servers -> ready.
Stop: no new intake, control or HTTP connections -> scheduler -> channel retries -> running turns get the grace
period -> summarizer, persona MCP servers, host tools -> outbox flush -> control socket ->
connectors -> providers -> database -> unlock.

This and :mod:`gateway.components` are the modules of the core that name specific connectors
and tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from connectors.base import Connector
from gateway import otel
from gateway.components import Components, build_components
from gateway.config import Settings
from gateway.data_dir import DataDirLock, prepare_data_dir
from gateway.heap import settle_heap
from gateway.personas import Persona
from gateway.store.engines import open_store
from gateway.store.node_watch import watch_node_lock
from gateway.watchdog import SystemdNotifier
from tools.browser.manager import warm_browser

if TYPE_CHECKING:
    from gateway.cluster.node import ClusterNode

__all__ = ["Gateway", "run_daemon"]

log = logging.getLogger("talon.daemon")
CHANNEL_STOP_TIMEOUT = 10.0  # seconds one channel may take to disconnect at shutdown


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
                    # psycopg's listener: loaded only for a cluster
                    from gateway.cluster.node import ClusterNode

                    self._cluster = ClusterNode.of(db, self.settings, on_lost=self._lose_database)
                    await self._cluster.join()  # before anything leases or sends
                self._components = build_components(self.settings, self.personas, db)
            except BaseException:
                await db.close()
                raise
            await self._start_parts(self._components)
        except BaseException:
            await self.close()
            raise

    async def _run_scheduler(self, c: Components) -> None:
        """The scheduler; in a cluster, on one node at a time (it waits for the role)."""
        if self._cluster is not None and not await self._cluster.lead("scheduler", self._stopped):
            return
        await c.scheduler.run(self._stopped)

    async def _start_parts(self, c: Components) -> None:
        if self._cluster is not None:
            self._cluster.share_channels(c.connectors)
            c.status.cluster = self._cluster
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
