"""``talon status``: what the running gateway reports about itself, gathered from its parts.

:class:`StatusReporter` reads the connectors' health, the queue's running turns and the
database's counts into one :class:`StatusReport`; the control socket renders it for the
wire (:func:`gateway.control.status_reply`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from connectors.base import Connector
from gateway.queue import TurnQueue
from gateway.store.db import Database
from gateway.store.nodes import NodeRow, list_nodes
from gateway.store.outbox import count_by_status as outbox_counts
from gateway.store.queue import DeadLetter, dead_letters
from gateway.store.queue import count_by_status as queue_counts
from gateway.store.usage import FallbackCount, fallback_counts

__all__ = [
    "DEAD_LETTERS_SHOWN",
    "ChannelStatus",
    "ClusterStatus",
    "StatusReport",
    "StatusReporter",
    "channel_status",
]

DEAD_LETTERS_SHOWN = 20
FALLBACK_WINDOW = 86_400.0  # `talon status` counts the fallbacks of the last day


@dataclass(frozen=True, slots=True)
class ChannelStatus:
    """A channel's connection state and since when it holds.

    ``state`` is ``starting``, ``retrying`` (its start failed for now: ``detail`` is the last
    error, ``retry_in`` the seconds until the next attempt), ``connected`` (running),
    ``reconnecting``, ``failed`` (``detail`` says why; not retried) or ``stopped``.
    """

    state: str
    detail: str
    since: float
    retry_in: float | None = None


@dataclass(frozen=True, slots=True)
class StatusReport:
    """The gateway at one moment.

    ``queue`` and ``outbox`` count items by status (statuses without items are left out);
    ``dead_letters`` are the most recent ones, newest first.
    """

    pid: int
    uptime: float
    channels: dict[str, ChannelStatus]
    running_turns: int
    queue: dict[str, int]
    outbox: dict[str, int]
    dead_letters: list[DeadLetter]
    fallbacks: list[FallbackCount] = field(default_factory=list)  # per persona, the last day
    cluster: ClusterStatus | None = None  # on a cluster node


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    """The cluster as this node sees it: every registered node, and the roles this one holds."""

    node_id: str
    nodes: list[NodeRow]
    roles: list[str]


class ClusterSource(Protocol):
    node_id: str
    failover: float

    def held_roles(self) -> list[str]: ...


class StatusReporter:
    """Assembles :class:`StatusReport` from the running parts; uptime counts from its creation.

    Args:
        db (:class:`gateway.store.db.Database`): The daemon's database.
        connectors (Mapping[:obj:`str`, :class:`connectors.base.Connector`]): The channels by name.
        queue (:class:`gateway.queue.TurnQueue`): The turn queue.
    """

    def __init__(self, db: Database, connectors: Mapping[str, Connector], queue: TurnQueue):
        self.db = db
        self.connectors = connectors
        self.queue = queue
        self.started_at = time.time()
        self.cluster: ClusterSource | None = None  # set when the node joins a cluster

    async def report(self) -> StatusReport:
        return StatusReport(
            pid=os.getpid(),
            uptime=round(time.time() - self.started_at, 1),
            channels={name: channel_status(c) for name, c in self.connectors.items()},
            running_turns=self.queue.running_count,
            queue=await self.db.read(queue_counts),
            outbox=await self.db.read(outbox_counts),
            dead_letters=await self.db.read(dead_letters, DEAD_LETTERS_SHOWN),
            fallbacks=await self.db.read(fallback_counts, since=time.time() - FALLBACK_WINDOW),
            cluster=await self._cluster(),
        )

    async def _cluster(self) -> ClusterStatus | None:
        source = self.cluster
        if source is None:
            return None
        nodes = await self.db.read(list_nodes, time.time(), source.failover)
        return ClusterStatus(source.node_id, nodes, source.held_roles())


def channel_status(connector: Connector) -> ChannelStatus:
    health = connector.health
    retry_in = None
    if health.state == "retrying" and health.retry_at is not None:
        retry_in = round(max(0.0, health.retry_at - time.time()), 1)
    return ChannelStatus(health.state, health.detail, health.since, retry_in)
