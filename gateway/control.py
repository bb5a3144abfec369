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
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from connectors.base import IntakeResult, IntakeStatus
from gateway.errors import RefusedError
from gateway.events import EventBus
from gateway.ndjson_socket import NDJSONServer, Reply
from gateway.status import StatusReport

if TYPE_CHECKING:
    from gateway.poster import Posted

log = logging.getLogger("talon.control")

SOCKET_NAME = "control.sock"
MAX_LINE = 1_000_000


class ConsoleChannel(Protocol):
    """What ``talon chat`` uses of a console channel (:class:`connectors.console.ConsoleConnector`)."""

    name: str

    def attach(
        self, thread: str, queue: asyncio.Queue[dict[str, Any]] | None = None
    ) -> AbstractContextManager[asyncio.Queue[dict[str, Any]]]:
        """Receive the thread's deliveries (into ``queue`` when given) while the context is open."""

    async def submit(
        self, thread: str, text: str, *, event_id: str | None = None, persona: str | None = None
    ) -> IntakeResult:
        """A line typed by the local user, handed to the intake."""

    async def unseen(self, thread: str) -> tuple[list[dict[str, Any]], int]:
        """The thread's deliveries no window confirmed (the newest ones), and how many older
        ones were left out."""

    async def seen(self, thread: str, upto: int) -> None:
        """A window printed the thread's deliveries up to delivery id ``upto``."""


class StatusSource(Protocol):
    """``talon status`` (:class:`gateway.status.StatusReporter`)."""

    async def report(self) -> StatusReport: ...


class Notifier(Protocol):
    """``talon send`` (:class:`gateway.poster.ChannelPoster`)."""

    async def notify(self, channel: str, chat: str | None, text: str) -> Posted:
        """Post a notification; raises :class:`~gateway.errors.RefusedError` saying why it cannot."""


class ControlExtension(Protocol):
    """Ops another part adds to the socket (the host tools' ``host_tools_session``)."""

    async def handle_control(self, request: dict[str, Any], reply: Reply) -> bool:
        """Serve ``request`` when it is this part's op; False when it is not."""


def status_reply(report: StatusReport) -> dict[str, Any]:
    """``report`` as the ``status`` op's reply carries it (``talon status`` reads it)."""
    return asdict(report)


def notification_reply(posted: Posted) -> dict[str, Any]:
    """What the ``send`` op answers for a posted notification (``talon send`` prints it)."""
    return {"ok": True, "thread_id": posted.thread_id, "chunks": len(posted.outbox_ids)}


class ControlServer(NDJSONServer):
    """Serves the control ops on the socket at ``path``.

    Requests on one connection are answered in order, each to its ``done`` or ``error``
    line; the next line is read once the one before it is answered.

    Args:
        path (:class:`pathlib.Path`): The socket, in the data dir.
        bus (:class:`gateway.events.EventBus`): Where ``talon chat`` follows its turns.
        consoles (Mapping[:obj:`str`, :class:`ConsoleChannel`]): The console channels by name,
            in configuration order.
        status (:class:`StatusSource`): Serves ``status``.
        notifier (:class:`Notifier`): Serves ``send``.
        personas (Collection[:obj:`str`]): The loaded personas: ``chat`` and ``attach``
            refuse any other name.
        extensions (Sequence[:class:`ControlExtension`], optional): Asked in turn for any other op.
    """

    def __init__(
        self,
        path: Path,
        *,
        bus: EventBus,
        consoles: Mapping[str, ConsoleChannel],
        status: StatusSource,
        notifier: Notifier,
        personas: Collection[str],
        extensions: Sequence[ControlExtension] = (),
    ):
        super().__init__(path, max_line=MAX_LINE)
        self.bus = bus
        self.consoles = consoles
        self.status = status
        self.notifier = notifier
        self.personas = frozenset(personas)
        self.extensions = tuple(extensions)

    def console(self, name: str | None) -> ConsoleChannel | None:
        """The console channel called ``name``, or the first one when ``name`` is None."""
        if name is None:
            return next(iter(self.consoles.values()), None)
        return self.consoles.get(name)

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
            await reply({"type": "done", "status": status_reply(await self.status.report())})
        elif op == "chat":
            await self._chat(req, reply)
        elif op == "attach":
            await self._attach(req, reply)
        elif op == "seen":
            await self._seen(req, reply)
        elif op == "send":
            await self._send(req, reply)
        elif not await self._extended(req, reply):
            await reply({"type": "error", "error": f"unknown op {op!r}"})

    async def _extended(self, req: dict[str, Any], reply: Reply) -> bool:
        for extension in self.extensions:
            if await extension.handle_control(req, reply):
                return True
        return False

    async def _send(self, req: dict[str, Any], reply: Reply) -> None:
        try:
            posted = await self.notifier.notify(
                str(req.get("channel")), req.get("chat"), str(req.get("text", ""))
            )
        except RefusedError as exc:
            await reply({"type": "done", "ok": False, "error": str(exc)})
            return
        await reply({"type": "done", **notification_reply(posted)})

    def persona_refusal(self, persona: object) -> str | None:
        """Why a chat cannot be with ``persona`` (None: no persona asked for, or a loaded one)."""
        if persona is None or persona in self.personas:
            return None
        known = ", ".join(sorted(self.personas)) or "none loaded"
        return f"no persona named {persona!r}; the personas are: {known}"

    async def _chat(self, req: dict[str, Any], reply: Reply) -> None:
        console = self.console(req.get("channel"))
        if console is None:
            await reply(
                {
                    "type": "error",
                    "error": "no console channel is configured; add {name: console, type: console}",
                }
            )
            return
        refusal = self.persona_refusal(req.get("persona"))
        if refusal is not None:
            await reply({"type": "error", "error": refusal})
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
            with self.bus.subscribe(result.thread_id, inbox):
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
            elif kind in ("working", "preview"):  # a preview: the reply so far (connectors/console_stream.py)
                await reply(item)
            elif kind == "turn_ended" and message_id in item.get("messages", []):
                ended = item
        await reply({"type": "done", "status": ended["status"], "error": ended.get("error")})

    async def _attach(self, req: dict[str, Any], reply: Reply) -> None:
        """Stream the thread's deliveries: first those no window confirmed, then live ones
        (a delivery may come twice; clients drop repeats by id)."""
        console = self.console(req.get("channel"))
        if console is None:
            await reply({"type": "error", "error": "no console channel is configured"})
            return
        refusal = self.persona_refusal(req.get("persona"))
        if refusal is not None:
            await reply({"type": "error", "error": refusal})
            return
        thread = str(req.get("thread") or "main")
        with console.attach(thread) as deliveries:  # before reading the backlog: nothing falls between
            backlog, left_out = await console.unseen(thread)
            await reply({"type": "attached", "unseen": len(backlog), "left_out": left_out})
            for delivery in backlog:
                await reply(delivery)
            while True:
                await reply(await deliveries.get())

    async def _seen(self, req: dict[str, Any], reply: Reply) -> None:
        console = self.console(req.get("channel"))
        upto = req.get("upto")
        if console is None or not isinstance(upto, int) or isinstance(upto, bool):
            await reply({"type": "error", "error": "seen needs a console channel and an integer upto"})
            return
        await console.seen(str(req.get("thread") or "main"), upto)
        await reply({"type": "done"})
