"""The control socket: newline-delimited JSON over a Unix socket in the data dir.

Owner-only permissions on the socket (and the data dir) are the authentication. Used by
``talon chat``, ``talon status`` and ``talon send``. Each request is one JSON object on
one line; the server answers with one or more JSON lines, the last one carrying
``"type": "done"`` or ``"type": "error"``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from connectors.base import IntakeStatus
from connectors.console import ConsoleConnector
from gateway.errors import RefusedError
from gateway.events import EventBus
from gateway.ndjson_socket import NDJSONServer, Reply
from gateway.status import StatusReport

log = logging.getLogger("talon.control")

SOCKET_NAME = "control.sock"
MAX_LINE = 1_000_000


class ControlTarget(Protocol):
    """What the control server needs from the running gateway."""

    bus: EventBus

    def console(self, name: str | None) -> ConsoleConnector | None: ...

    async def status(self) -> StatusReport: ...

    async def send_notification(self, channel: str, chat: str | None, text: str) -> dict[str, Any]:
        """Post a notification; raises :class:`~gateway.errors.RefusedError` saying why it cannot."""

    async def handle_extra(self, request: dict[str, Any], reply: Reply) -> bool:
        """Ops added by other parts (host tools); False when unknown."""


def status_reply(report: StatusReport) -> dict[str, Any]:
    """``report`` as the ``status`` op's reply carries it (``talon status`` reads it)."""
    return asdict(report)


class ControlServer(NDJSONServer):
    """Serves the control ops for ``target`` on the socket at ``path``.

    Requests on one connection are answered in order, each to its ``done`` or ``error``
    line; the next line is read once the one before it is answered.
    """

    def __init__(self, path: Path, target: ControlTarget):
        super().__init__(path, max_line=MAX_LINE)
        self.target = target

    def encode(self, reply: dict[str, Any]) -> bytes:
        return json.dumps(reply, default=str).encode()

    def refusal(self, reason: str, *, too_long: bool) -> dict[str, Any]:
        return {"type": "error", "error": f"malformed request: {reason}"}

    def failure(self, request: dict[str, Any], exc: Exception) -> dict[str, Any]:
        log.exception("control request %r failed", request.get("op"))
        return {"type": "error", "error": f"{type(exc).__name__}: {exc}"}

    async def handle_request(self, req: dict[str, Any], reply: Reply) -> None:
        op = req.get("op")
        if op == "ping":
            await reply({"type": "done", "pid": os.getpid()})
        elif op == "status":
            await reply({"type": "done", "status": status_reply(await self.target.status())})
        elif op == "chat":
            await self._chat(req, reply)
        elif op == "attach":
            await self._attach(req, reply)
        elif op == "send":
            await self._send(req, reply)
        elif not await self.target.handle_extra(req, reply):
            await reply({"type": "error", "error": f"unknown op {op!r}"})

    async def _send(self, req: dict[str, Any], reply: Reply) -> None:
        try:
            result = await self.target.send_notification(
                str(req.get("channel")), req.get("chat"), str(req.get("text", ""))
            )
        except RefusedError as exc:
            await reply({"type": "done", "ok": False, "error": str(exc)})
            return
        await reply({"type": "done", **result})

    async def _chat(self, req: dict[str, Any], reply: Reply) -> None:
        console = self.target.console(req.get("channel"))
        if console is None:
            await reply(
                {
                    "type": "error",
                    "error": "no console channel is configured; add {name: console, type: console}",
                }
            )
            return
        text = str(req.get("text", "")).strip()
        if not text:
            await reply({"type": "error", "error": "empty message"})
            return
        thread = str(req.get("thread") or "main")
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        with console.attach(thread, inbox):
            result = await console.submit(
                thread, text, event_id=req.get("event_id"), persona=req.get("persona")
            )
            await reply(
                {
                    "type": "accepted",
                    "status": result.status.value,
                    "thread_id": result.thread_id,
                    "message_id": result.message_id,
                }
            )
            if result.status is IntakeStatus.UNROUTED:
                await reply(
                    {"type": "error", "error": "no persona is bound to the console channel; add a binding"}
                )
                return
            if (
                result.status is not IntakeStatus.ACCEPTED
                or not req.get("wait", True)
                or result.thread_id is None
            ):
                await reply({"type": "done", "status": result.status.value})
                return
            with self.target.bus.subscribe(result.thread_id, inbox):
                await self._await_reply(result.message_id, inbox, reply)

    async def _await_reply(
        self, message_id: int | None, inbox: asyncio.Queue[dict[str, Any]], reply: Reply
    ) -> None:
        """Stream deliveries until the turn covering ``message_id`` ended and its reply arrived."""
        seen: set[int] = set()
        ended: dict[str, Any] | None = None
        while ended is None or not set(ended.get("outbox", [])) <= seen:
            item = await inbox.get()
            kind = item.get("type")
            if kind == "message":
                seen.add(item["id"])
                await reply(item)
            elif kind == "working":
                await reply(item)
            elif kind == "turn_ended" and message_id in item.get("messages", []):
                ended = item
        await reply({"type": "done", "status": ended["status"], "error": ended.get("error")})

    async def _attach(self, req: dict[str, Any], reply: Reply) -> None:
        console = self.target.console(req.get("channel"))
        if console is None:
            await reply({"type": "error", "error": "no console channel is configured"})
            return
        with console.attach(str(req.get("thread") or "main")) as deliveries:
            await reply({"type": "attached"})
            while True:
                await reply(await deliveries.get())
