"""The overview's live updates: a Server-Sent Events stream of the gateway's status for a
signed-in session. It sends a snapshot when something changed (checked every
:data:`INTERVAL` seconds) and a comment line now and then so proxies keep it open; it ends
when the session ends or the server stops."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING, Any

from aiohttp import web

from gateway.http.console.sessions import Session

if TYPE_CHECKING:
    from gateway.http.console.context import Console
    from gateway.status import StatusReport

__all__ = ["INTERVAL", "EventStream", "snapshot"]

INTERVAL = 2.0
KEEPALIVE = 15.0


def snapshot(report: StatusReport) -> dict[str, Any]:
    """What the overview shows live: counts and channel states, no message content."""
    return {
        "running_turns": report.running_turns,
        "queue": report.queue,
        "outbox": report.outbox,
        "channels": {name: ch.state for name, ch in report.channels.items()},
        "dead_letters": len(report.dead_letters),
    }


class EventStream:
    def __init__(self, feature: Console):
        self.f = feature

    async def serve(self, request: web.Request, session: Session) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        last: dict[str, Any] | None = None
        quiet = 0.0
        try:
            while not self.f.stopping.is_set() and self.f.auth.sessions.alive(session):
                now = snapshot(await self.f.deps.status.report())
                if now != last:
                    await response.write(f"event: status\ndata: {json.dumps(now)}\n\n".encode())
                    last, quiet = now, 0.0
                elif quiet >= KEEPALIVE:
                    await response.write(b": keep-alive\n\n")
                    quiet = 0.0
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.f.stopping.wait(), INTERVAL)
                quiet += INTERVAL
        except ConnectionResetError:  # the browser went away
            return response
        with contextlib.suppress(ConnectionResetError):
            await response.write(b"event: end\ndata: {}\n\n")
        return response
