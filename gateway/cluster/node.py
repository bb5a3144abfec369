"""This node's membership of the cluster: it joins, beats its heartbeat, takes back the work
of lost nodes, hears of work committed elsewhere, and leaves.

Every ``failover_seconds / 3`` the node renews its row, its queue leases and its outbox
claims in one transaction, then reaps lost nodes (:func:`gateway.store.nodes.reap`), sweeps
for work nobody holds and tells whoever listens how many nodes are alive. A node that finds
its own row gone was silent longer than ``failover_seconds`` (its event loop stalled, its
connection hung): other nodes have taken its work back, so it stops at once, as it does when
its writer connection is lost.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Protocol

from connectors.base import Connector, single_receiver
from gateway import talon_version
from gateway.cluster.markers import marker_text, remove_marker, write_marker
from gateway.cluster.roles import RoleGate
from gateway.config import Settings
from gateway.database_settings import DatabaseSettings
from gateway.store.db import Database
from gateway.store.nodes import (
    backend_pid,
    beat,
    leave,
    list_nodes,
    lock_key,
    reap,
    register_node,
    try_lock,
)
from gateway.store.pg_listen import Listener
from gateway.store.postgres import NodeLockedError

__all__ = ["ClusterNode"]

log = logging.getLogger("talon.cluster")

QUEUE_CHANNEL = "talon_queue"  # notified by migration 0027's trigger, payload the thread id
INTERACTIONS_CHANNEL = "talon_interactions"  # migration 0028's trigger, payload the interaction id
# Seconds a node waits before it tries to lease work another node took in. That node has it
# first (it notified its own queue as it committed), so two nodes seldom race for one thread:
# a race costs both a serialization conflict and reruns. Measured with bench/bench_cluster.py:
# two nodes' conflicts fell from 20-31 to under 1 per second, and their replies/s from
# 0.7-0.8x one node's to 0.9-1.0x. A node that is busy leaves the work to the others this late.
REMOTE_WORK_DELAY = 0.05


class _Queue(Protocol):
    def notify(self, thread_id: int) -> None: ...
    async def sweep(self) -> None: ...


class _Outbox(Protocol):
    async def take_over(self, thread_ids: tuple[int, ...]) -> None: ...
    async def sweep(self) -> None: ...


class _Interactions(Protocol):
    def heard(self, interaction_id: str) -> None: ...
    async def sweep(self) -> None: ...


class ClusterNode:
    """One node of a cluster (``database.cluster: true``).

    Args:
        db (:class:`gateway.store.db.Database`): The cluster's PostgreSQL database.
        settings (:class:`gateway.database_settings.DatabaseSettings`): ``database:``.
        max_attempts (:obj:`int`): ``queue.max_attempts``: a lost node's items that used them
            up are dead-lettered, as after a crash.
        on_lost (Callable[[], None]): Called once when this node finds its work taken back.
        workspaces_path (:class:`pathlib.Path`): ``workspaces_dir``, where the node leaves its
            marker (:mod:`gateway.cluster.markers`).
    """

    def __init__(
        self,
        db: Database,
        settings: DatabaseSettings,
        *,
        max_attempts: int,
        on_lost: Callable[[], None],
        workspaces_path: Path,
    ) -> None:
        self.db = db
        self.workspaces_path = workspaces_path
        self.node_id = settings.node_name()
        self.failover = settings.failover_seconds
        self.every = settings.heartbeat_seconds
        self._url = settings.url or ""
        self._max_attempts = max_attempts
        self._on_lost = on_lost
        self._writer_pid: int | None = None
        self._listener: Listener | None = None
        self._task: asyncio.Task[None] | None = None
        self._roles: list[RoleGate] = []
        self._members: list[Callable[[int], None]] = []

    @classmethod
    def of(cls, db: Database, settings: Settings, *, on_lost: Callable[[], None]) -> ClusterNode:
        """The node ``settings`` (the loaded talon.yaml) describe."""
        return cls(
            db,
            settings.database,
            max_attempts=settings.queue.max_attempts,
            on_lost=on_lost,
            workspaces_path=settings.workspaces_path,
        )

    def share_channels(self, connectors: Mapping[str, Connector]) -> None:
        """Give each single-receiver channel (a bot's Telegram poller, Discord's gateway
        session) a role, taken by one node at a time, and share each channel's send rate over
        the nodes alive: it is the platform's limit for the bot, however many nodes send."""
        for name, connector in connectors.items():
            if single_receiver(connector):
                connector.receive_gates = partial(self._receiver_role, name)  # type: ignore[attr-defined]
        pacers = [pacer for connector in connectors.values() if (pacer := getattr(connector, "pacer", None))]
        self.on_members(lambda nodes: [pacer.share(nodes) for pacer in pacers])

    async def lead(self, role: str, stopped: asyncio.Event) -> bool:
        """Wait until this node holds ``role`` (True), or until ``stopped`` is set (False)."""
        held = asyncio.create_task(self.role(role).wait())
        stopping = asyncio.create_task(stopped.wait())
        await asyncio.wait({held, stopping}, return_when=asyncio.FIRST_COMPLETED)
        for task in (held, stopping):
            task.cancel()
        return not stopped.is_set()

    def _receiver_role(self, channel: str, receiver: str) -> RoleGate:
        return self.role(f"channel:{channel}:{receiver}" if receiver else f"channel:{channel}")

    def role(self, name: str) -> RoleGate:
        """The role ``name`` (a bot's poller, a Discord shard, the scheduler), which this node
        may come to hold; asked again (a channel started again), the same gate."""
        gate = next((gate for gate in self._roles if gate.name == name), None)
        if gate is None:
            gate = RoleGate(self.db, name, self.every)
            self._roles.append(gate)
        return gate

    def on_members(self, fn: Callable[[int], None]) -> None:
        """Call ``fn(n)`` with the number of nodes alive, after each heartbeat (a channel's
        send rate is shared out over them)."""
        self._members.append(fn)

    def held_roles(self) -> list[str]:
        """The roles this node holds now."""
        return [gate.name for gate in self._roles if gate.held]

    async def join(self) -> None:
        """Hold this node's lock and register it, before anything leases or sends.

        Raises:
            NodeLockedError: a running node already has this node id.
        """
        key = lock_key(f"node:{self.node_id}")
        if not await self.db.on_writer_session(try_lock, key):
            raise NodeLockedError(
                f"a running node of this cluster already has the node id {self.node_id!r}; give each node "
                "its own database.node_id (the default is the host name)"
            )
        self._writer_pid = await self.db.on_writer_session(backend_pid)
        host, pid, now = socket.gethostname(), os.getpid(), time.time()
        await self.db.run_transaction(
            register_node, self.node_id, host=host, pid=pid, version=talon_version(), key=key, now=now
        )
        try:
            await asyncio.to_thread(
                write_marker, self.workspaces_path, self.node_id, marker_text(host, pid, now)
            )
        except OSError as exc:  # talon doctor names the node whose marker it cannot find
            log.warning(
                "could not leave this node's marker in workspaces_dir %s: %s", self.workspaces_path, exc
            )
        log.info("joined the cluster as node %s", self.node_id)

    def start(self, queue: _Queue, outbox: _Outbox, interactions: _Interactions) -> None:
        """Beat, reap and sweep in the background; hand other nodes' new work to ``queue``, and
        the questions they asked or closed to ``interactions``."""

        def heard(payload: str) -> None:
            try:
                asyncio.get_running_loop().call_later(REMOTE_WORK_DELAY, queue.notify, int(payload))
            except ValueError:
                log.warning("ignoring a queue notification that is not a thread id: %.40r", payload)

        self._listener = Listener(
            self._url,
            {QUEUE_CHANNEL: heard, INTERACTIONS_CHANNEL: interactions.heard},
            own_pid=lambda: self._writer_pid,
        )
        self._listener.start()
        self._task = asyncio.create_task(
            self._beat_forever(queue, outbox, interactions), name="cluster-heartbeat"
        )

    async def _tell_members(self, now: float) -> None:
        if self._members:
            nodes = await self.db.read(list_nodes, now, self.failover)
            alive = sum(1 for node in nodes if node.alive)
            for fn in self._members:
                fn(alive)

    async def _beat_forever(self, queue: _Queue, outbox: _Outbox, interactions: _Interactions) -> None:
        try:
            await self._tell_members(time.time())
        except sqlite3.Error as exc:
            log.warning("could not count the cluster's nodes: %s", exc)
        while True:
            await asyncio.sleep(self.every)
            now = time.time()
            try:
                alive = await self.db.run_transaction(beat, self.node_id, now, now + self.failover)
                if not alive:
                    log.error(
                        "this node was silent for more than failover_seconds (%g s) and the cluster took its "
                        "work back; stopping",
                        self.failover,
                    )
                    self._on_lost()
                    return
                reaped = await self.db.run_transaction(reap, self._max_attempts, now, self.failover)
                if reaped:
                    log.warning(
                        "took over from lost node(s) %s: %d queue items pending again, %d dead-lettered, "
                        "%d threads to send",
                        ", ".join(reaped.nodes) or "-",
                        reaped.released,
                        reaped.dead_lettered,
                        len(reaped.outbox_threads),
                    )
                    await outbox.take_over(reaped.outbox_threads)
                await queue.sweep()
                await outbox.sweep()
                await interactions.sweep()
                await self._tell_members(now)
            except sqlite3.Error as exc:  # a lost writer connection is the node watch's to act on
                log.warning("cluster heartbeat failed: %s", exc)

    async def stop(self) -> None:
        """Stop beating and listening (the node's work stays held until :meth:`leave`)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._listener is not None:
            await self._listener.stop()

    async def leave(self) -> None:
        """Leave in order: whatever this node still holds is taken back by the next node that looks."""
        await asyncio.to_thread(remove_marker, self.workspaces_path, self.node_id)
        try:
            await self.db.run_transaction(leave, self.node_id)
        except sqlite3.Error as exc:
            log.warning("could not leave the cluster in order (%s); the other nodes will notice", exc)
