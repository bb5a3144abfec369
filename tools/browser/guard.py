"""The egress guard in front of a browser session: every request the page makes is vetted.

Two layers, both the guard of :mod:`tools.egress` with the persona's net_http policy:

1. **Routing.** Every request Playwright can intercept (documents, scripts, styles, images,
   XHR, fetch, beacons, and WebSockets through ``route_web_socket``) is checked with
   :func:`tools.egress.vetted_addresses` before Chromium connects; a refused one is aborted and
   recorded with the guard's reason, which the next observation reports.
2. **The pinned proxy.** The session's Chromium context sends all its traffic through its own
   :class:`tools.workspace.egress_proxy.GuardedEgress` on 127.0.0.1 (loopback included), which
   vets the destination again and connects to exactly the addresses it vetted. This covers
   what routing does not see (redirect hops, which Playwright does not route; requests from
   workers) and DNS rebinding between the check and the connection: Chromium never resolves a
   name itself.

Schemes other than http(s), ws(s), data: and blob: are refused.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from yarl import URL

from tools.base import ToolError
from tools.egress import Resolve, vetted_addresses
from tools.ssrf import EgressPolicy
from tools.workspace.egress_proxy import GuardedEgress

__all__ = ["Blocked", "RequestGuard"]

log = logging.getLogger(__name__)

MAX_BLOCKED_KEPT = 50
_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_LOCAL_SCHEMES = frozenset({"data", "blob", "about"})


@dataclass(frozen=True, slots=True)
class Blocked:
    """One request the guard refused."""

    url: str
    reason: str
    kind: str  # the Playwright resource type: document, image, fetch, websocket, ...

    def as_dict(self) -> dict[str, str]:
        return {"url": self.url[:300], "kind": self.kind, "reason": self.reason}


@dataclass(slots=True)
class RequestGuard:
    """The guard of one browser session (one thread's context).

    Attributes:
        policy (:class:`tools.ssrf.EgressPolicy`): Where the persona may go.
        resolve: Replaces the system resolver (tests answer with a stub; no packet leaves).
        blocked (deque[:class:`Blocked`]): Refusals since the last :meth:`take_blocked`.
    """

    policy: EgressPolicy
    resolve: Resolve | None = None
    proxy: GuardedEgress | None = None
    blocked: deque[Blocked] = field(default_factory=lambda: deque(maxlen=MAX_BLOCKED_KEPT))
    allowed_count: int = 0

    async def start_proxy(self) -> str:
        """Start the session's pinned proxy; its ``http://127.0.0.1:<port>`` address."""
        self.proxy = GuardedEgress.create(self.policy, resolve=self.resolve)
        port = await self.proxy.start_loopback()
        return f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        if self.proxy is not None:
            await self.proxy.close()
            self.proxy = None

    async def decide(self, url: str) -> str | None:
        """Why a request to ``url`` is refused, or ``None`` when it may go."""
        try:
            parsed = URL(url)
        except ValueError:
            return f"{url[:100]!r} is not a valid URL"
        scheme = parsed.scheme.lower()
        if scheme in _LOCAL_SCHEMES:
            return None
        if scheme not in _PORTS:
            return f"the {scheme or 'empty'!r} scheme is not allowed; only http(s) and ws(s)"
        if not parsed.raw_host:
            return f"{url[:100]!r} has no host"
        try:
            await vetted_addresses(
                parsed.raw_host, parsed.port or _PORTS[scheme], self.policy, resolve=self.resolve
            )
        except ToolError as exc:
            return str(exc)
        return None

    def refuse(self, url: str, reason: str, kind: str) -> None:
        self.blocked.append(Blocked(url, reason, kind))
        log.info("browser request refused", extra={"url": url[:300], "kind": kind, "reason": reason})

    def take_blocked(self) -> list[dict[str, str]]:
        """The refusals since the last call, oldest first (for an observation)."""
        found = [b.as_dict() for b in self.blocked]
        self.blocked.clear()
        return found

    # ------------------------------------------------------------ Playwright handlers

    async def on_route(self, route: Any) -> None:
        """``context.route("**/*", ...)``: continue a vetted request, abort a refused one."""
        request = route.request
        reason = await self.decide(request.url)
        if reason is None:
            self.allowed_count += 1
            await route.continue_()
            return
        self.refuse(request.url, reason, request.resource_type)
        await route.abort("blockedbyclient")

    async def on_web_socket(self, ws: Any) -> None:
        """``context.route_web_socket("**/*", ...)``: connect a vetted socket, close a refused one."""
        reason = await self.decide(ws.url)
        if reason is None:
            self.allowed_count += 1
            ws.connect_to_server()
            return
        self.refuse(ws.url, reason, "websocket")
        await ws.close(code=1008, reason="blocked by the egress guard")
