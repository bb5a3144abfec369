"""``/metrics``: the process's counters (:mod:`gateway.metrics`) and, read at scrape time, the
gauges of stored state and of the channels' connections, in Prometheus' text format."""

from __future__ import annotations

import hmac
import time
from collections.abc import Iterator, Mapping

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from connectors.base import Connector
from gateway.metrics import REGISTRY
from gateway.store.db import Database
from gateway.store.gauges import StoredGauges, stored_gauges
from gateway.usage import Periods

__all__ = ["MetricsFeature"]

_CHANNEL_STATES = ("starting", "retrying", "connected", "reconnecting", "failed", "stopped")


class MetricsFeature:
    """Serves ``/metrics``; with ``token`` set, only to ``Authorization: Bearer <token>``.

    Args:
        db (:class:`gateway.store.db.Database`): read once per scrape, on the reader.
        connectors (Mapping[:obj:`str`, :class:`connectors.base.Connector`]): their health.
        token (:obj:`str` | :obj:`None`): the bearer token scrapers must send.
        timezone (:obj:`str`): the day and month budget use is counted in.
    """

    name = "metrics"

    def __init__(
        self, db: Database, connectors: Mapping[str, Connector], *, token: str | None, timezone: str
    ) -> None:
        self.db = db
        self.connectors = connectors
        self.token = token
        self.timezone = timezone
        self._state = _StateCollector(connectors)
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self._state)

    def install(self, app: web.Application) -> None:
        app.router.add_get("/metrics", self.scrape)

    async def scrape(self, request: web.Request) -> web.Response:
        if self.token is not None and not _bearer_matches(request, self.token):
            return web.Response(
                status=401, text="missing or wrong bearer token\n", headers={"WWW-Authenticate": "Bearer"}
            )
        now = time.time()
        self._state.stored = await self.db.read(stored_gauges, Periods.at(now, self.timezone).names)
        self._state.now = now
        body = generate_latest(REGISTRY) + generate_latest(self._registry)
        return web.Response(
            body=body, headers={"Content-Type": CONTENT_TYPE_LATEST, "Cache-Control": "no-store"}
        )


def _bearer_matches(request: web.Request, token: str) -> bool:
    given = request.headers.get("Authorization", "")
    scheme, _, value = given.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())


class _StateCollector(Collector):
    """The gauges of one scrape: set from :class:`StoredGauges` just before it is rendered."""

    def __init__(self, connectors: Mapping[str, Connector]) -> None:
        self.connectors = connectors
        self.stored: StoredGauges | None = None
        self.now = 0.0

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("talon_channel_up", "1 while the channel is connected", labels=["channel"])
        state = GaugeMetricFamily(
            "talon_channel_state", "1 for the channel's current connection state", labels=["channel", "state"]
        )
        reconnects = CounterMetricFamily(
            "talon_channel_reconnects",
            "Times the channel lost its connection since start",
            labels=["channel"],
        )
        for name, connector in self.connectors.items():
            health = connector.health
            up.add_metric([name], 1.0 if health.state == "connected" else 0.0)
            for s in _CHANNEL_STATES:
                state.add_metric([name, s], 1.0 if health.state == s else 0.0)
            reconnects.add_metric([name], float(getattr(health, "reconnects", 0)))
        yield from (up, state, reconnects)
        stored = self.stored
        if stored is None:
            return
        queue = GaugeMetricFamily("talon_queue_items", "Queued turns by status", labels=["status"])
        for status in ("pending", "leased"):
            queue.add_metric([status], float(stored.queue.get(status, 0)))
        yield queue
        yield GaugeMetricFamily(
            "talon_queue_oldest_age_seconds",
            "Age of the oldest pending queue item (0 when none)",
            value=max(0.0, self.now - stored.oldest_pending_at) if stored.oldest_pending_at else 0.0,
        )
        yield GaugeMetricFamily(
            "talon_dead_letters",
            "Turns that failed for good (talon status)",
            value=float(stored.queue.get("dead", 0)),
        )
        outbox = GaugeMetricFamily("talon_outbox_rows", "Outbox rows not sent, by status", labels=["status"])
        for status in ("pending", "sending", "failed", "unknown"):
            outbox.add_metric([status], float(stored.outbox.get(status, 0)))
        yield outbox
        tokens = GaugeMetricFamily(
            "talon_budget_used_tokens",
            "Tokens used in the current day or month (the budgets' periods), per persona and channel",
            labels=["scope", "subject", "period"],
        )
        cost = GaugeMetricFamily(
            "talon_budget_used_cost",
            "Cost used in the current day or month, per persona and channel",
            labels=["scope", "subject", "period"],
        )
        for (scope, subject, period), (used_tokens, used_cost) in sorted(stored.usage.items()):
            tokens.add_metric([scope, subject, period], float(used_tokens))
            cost.add_metric([scope, subject, period], used_cost)
        yield from (tokens, cost)
