"""Inbound webhooks: ``POST /hooks/...`` routes that turn a signed delivery into a turn of the
route's persona in its target chat, whose answer goes out through that channel's outbox.

A request is checked in this order, and nothing is stored until the last step: body size
(413, by the server's ``max_body_bytes``), secret (401), JSON (400), event filter (202,
ignored), rate limit (429). The delivery is then committed through the durable intake with
an event id made of the route and the sender's delivery id, so a redelivery is a duplicate
(202) and is answered once.
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

from connectors.base import InboundEvent, IntakeHandler, IntakeStatus, Sender, ThreadKey
from gateway.http.settings import WebhookRoute
from gateway.http.webhook_payload import delivery_id, event_name, fill_prompt, signature_ok
from gateway.intake import ShuttingDownError
from gateway.metrics import WEBHOOK_DELIVERIES

__all__ = ["WebhooksFeature"]

log = logging.getLogger("talon.webhooks")


class WebhooksFeature:
    """The ``http.webhooks`` routes.

    Args:
        routes (Sequence[:class:`gateway.http.settings.WebhookRoute`]): from talon.yaml.
        intake (:data:`connectors.base.IntakeHandler`): commits an event and queues its turn.
    """

    name = "webhooks"

    def __init__(self, routes: Sequence[WebhookRoute], intake: IntakeHandler) -> None:
        self.routes = list(routes)
        self.intake = intake
        self._recent: dict[str, deque[float]] = {r.name: deque() for r in self.routes}

    def install(self, app: web.Application) -> None:
        for route in self.routes:
            app.router.add_post(route.path, self._handler(route))

    def _handler(self, route: WebhookRoute) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            status, text = await self._take(route, request)
            WEBHOOK_DELIVERIES.labels(route.name, str(status)).inc()
            headers = {"Retry-After": "60"} if status == 429 else None
            return web.json_response({"status": text}, status=status, headers=headers)

        return handle

    async def _take(self, route: WebhookRoute, request: web.Request) -> tuple[int, str]:
        body = await request.read()  # over max_body_bytes: aiohttp answers 413
        if not signature_ok(route.auth, route.secret, request.headers, body):
            log.warning("webhook %s: refused a delivery with a missing or wrong secret", route.name)
            return 401, "bad signature"
        try:
            payload = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return 400, "the body is not JSON"
        if not isinstance(payload, dict | list):
            return 400, "the body is not a JSON object or array"
        event = event_name(route.auth, request.headers)
        if route.events and event not in route.events:
            return 202, "ignored"
        if not self._admit(route, time.monotonic()):
            return 429, "rate limited"
        delivery = delivery_id(route.auth, request.headers, body)
        inbound = InboundEvent(
            channel=route.channel,
            event_id=f"webhook:{route.name}:{delivery}",
            thread_key=ThreadKey(route.channel, route.chat),
            chat_type="group",
            sender=Sender(f"webhook:{route.name}", f"webhook {route.name}", is_bot=True),
            text=fill_prompt(route.prompt, payload),
            mentions_bot=True,
            persona=route.persona,
            raw={"webhook": route.name, "event": event, "delivery": delivery},
        )
        try:
            result = await self.intake(inbound)
        except ShuttingDownError:
            return 503, "stopping"
        if result.status is IntakeStatus.DUPLICATE:
            return 202, "duplicate"
        return 202, "accepted"

    def _admit(self, route: WebhookRoute, now: float) -> bool:
        """A sliding minute: at most ``per_minute`` deliveries in the last 60 seconds."""
        recent = self._recent[route.name]
        while recent and now - recent[0] >= 60:
            recent.popleft()
        if len(recent) >= route.per_minute:
            return False
        recent.append(now)
        return True
