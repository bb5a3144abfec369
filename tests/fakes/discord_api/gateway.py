"""The gateway half of the fake: sessions, sequence numbers, HELLO/IDENTIFY/RESUME/heartbeats,
and shards: a session identified with ``shard: [id, count]`` receives the events of the
guilds with ``(guild_id >> 22) % count == id``, and shard 0 the DMs, as Discord routes them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

_LOG_LIMIT = 1000  # events kept per session for RESUME replay


@dataclass(eq=False)
class Connection:
    """One websocket; everything it sends goes through ``queue`` so frames keep their order."""

    ws: web.WebSocketResponse
    compressor: Any = None  # a zlib compressobj when the client asked for zlib-stream
    queue: asyncio.Queue[str] = field(default_factory=asyncio.Queue)
    session: Session | None = None
    writer: asyncio.Task[None] | None = None

    def send(self, payload: dict[str, Any] | str) -> None:
        self.queue.put_nowait(payload if isinstance(payload, str) else json.dumps(payload))


@dataclass(eq=False)
class Session:
    session_id: str
    shard: tuple[int, int] = (0, 1)
    seq: int = 0
    log: list[tuple[int, str]] = field(default_factory=list)
    conn: Connection | None = None

    def receives(self, event: str, data: dict[str, Any]) -> bool:
        """Whether Discord routes this dispatch to this session's shard."""
        guild = data.get("guild_id") or (data.get("id") if event.startswith("GUILD_") else None)
        return shard_of(guild, self.shard[1]) == self.shard[0]


def shard_of(guild_id: Any, count: int) -> int:
    """The shard a guild's events go to; DMs (no guild), and the malformed events tests
    inject, go to shard 0."""
    try:
        return (int(guild_id) >> 22) % count
    except (TypeError, ValueError):
        return 0


class Gateway:
    """Speaks Discord's gateway protocol (JSON encoding, optional zlib-stream transport).

    ``ready_payloads(session)`` returns the READY user/guild payloads of a new session; the
    owner injects dispatches with :meth:`broadcast`. With ``identify_interval``, an IDENTIFY
    that comes sooner than that after the last one of its bucket (shard id modulo
    ``max_concurrency``) is answered with an invalid session and counted in
    :attr:`early_identifies`, as Discord limits session starts.
    """

    def __init__(
        self,
        *,
        token: str,
        heartbeat_interval_ms: int,
        ready_payloads: Callable[[Session], list[tuple[str, dict[str, Any]]]],
        new_session_id: Callable[[], str],
        max_concurrency: int = 1,
        identify_interval: float = 0.0,
    ) -> None:
        self._token = token
        self._heartbeat_ms = heartbeat_interval_ms
        self._ready_payloads = ready_payloads
        self._new_session_id = new_session_id
        self.connections: set[Connection] = set()
        self.sessions: dict[str, Session] = {}
        self._pending: list[tuple[str, dict[str, Any]]] = []
        self._rewind: dict[str, int] = {}  # session id -> sequence the next RESUME replays after
        self.identifies: list[dict[str, Any]] = []
        self.max_concurrency = max_concurrency
        self.identify_interval = identify_interval
        self.early_identifies = 0
        self._identified_at: dict[int, float] = {}  # bucket -> when its last IDENTIFY was taken
        self.resumes = 0
        self.heartbeats = 0
        self.connect_queries: list[dict[str, str]] = []

    # ---------------------------------------------------------------- dispatching

    def broadcast(self, event: str, data: dict[str, Any]) -> None:
        """Dispatch to every session of the shard the event is for; before that shard's first
        IDENTIFY, hold it until its READY."""
        targets = [s for s in self.sessions.values() if s.receives(event, data)]
        if not targets:
            self._pending.append((event, data))
        for session in targets:
            self._dispatch(session, event, data)

    def _dispatch(self, session: Session, event: str, data: dict[str, Any]) -> None:
        session.seq += 1
        text = json.dumps({"op": 0, "t": event, "s": session.seq, "d": data})
        session.log.append((session.seq, text))
        del session.log[:-_LOG_LIMIT]
        if session.conn is not None:
            session.conn.send(text)

    def rewind(self, event: str, data_id: str) -> None:
        """Make each session's next RESUME replay from the ``event`` dispatch whose ``d.id``
        is ``data_id`` on, as if the client had not seen it yet."""
        for session in self.sessions.values():
            for seq, text in session.log:
                payload = json.loads(text)
                data = payload["d"]
                if payload["t"] == event and isinstance(data, dict) and data.get("id") == data_id:
                    self._rewind[session.session_id] = seq - 1
                    break

    def send_raw(self, text: str) -> None:
        """Send ``text`` as a frame on every live connection, outside any session log."""
        for conn in self.connections:
            conn.send(text)

    async def disconnect_all(self, code: int) -> None:
        """Close every socket; sessions stay resumable and keep collecting events."""
        for conn in list(self.connections):
            self._detach(conn)
            with contextlib.suppress(Exception):
                await conn.ws.close(code=code, message=b"fake disconnect")

    async def close(self) -> None:
        for conn in list(self.connections):
            self._detach(conn)
            if conn.writer is not None:
                conn.writer.cancel()
            with contextlib.suppress(Exception):
                await conn.ws.close(code=1001, message=b"server shutting down")

    # ---------------------------------------------------------------- websocket

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        self.connect_queries.append(dict(request.query))
        compressor = zlib.compressobj() if request.query.get("compress") == "zlib-stream" else None
        conn = Connection(ws=ws, compressor=compressor)
        conn.writer = asyncio.create_task(self._write_loop(conn))
        self.connections.add(conn)
        conn.send({"op": 10, "d": {"heartbeat_interval": self._heartbeat_ms, "_trace": ["fake-gateway"]}})
        try:
            async for msg in ws:
                if msg.type is not WSMsgType.TEXT:
                    continue
                try:
                    payload = json.loads(msg.data)
                except ValueError:
                    await ws.close(code=4002, message=b"Error while decoding payload.")
                    break
                await self._on_op(conn, payload)
        finally:
            self._detach(conn)
            self.connections.discard(conn)
            if conn.writer is not None:
                conn.writer.cancel()
        return ws

    async def _write_loop(self, conn: Connection) -> None:
        try:
            while not conn.ws.closed:
                text = await conn.queue.get()
                if conn.compressor is not None:
                    frame = conn.compressor.compress(text.encode()) + conn.compressor.flush(zlib.Z_SYNC_FLUSH)
                    await conn.ws.send_bytes(frame)
                else:
                    await conn.ws.send_str(text)
        except (ConnectionError, RuntimeError):
            pass  # the socket went away; the reader side cleans up

    async def _on_op(self, conn: Connection, payload: dict[str, Any]) -> None:
        op = payload.get("op")
        data = payload.get("d")
        if op == 1:
            self.heartbeats += 1
            conn.send({"op": 11})
        elif op == 2:
            await self._identify(conn, data or {})
        elif op == 6:
            await self._resume(conn, data or {})
        elif op in (3, 4, 8):
            pass  # presence, voice state, member requests: accepted and ignored
        else:
            await conn.ws.close(code=4001, message=b"Unknown opcode.")

    async def _identify(self, conn: Connection, data: dict[str, Any]) -> None:
        if data.get("token") != self._token:
            await conn.ws.close(code=4004, message=b"Authentication failed.")
            return
        shard = _shard(data.get("shard"))
        if shard is None:
            await conn.ws.close(code=4010, message=b"Invalid shard.")
            return
        if self._too_soon(shard[0]):
            self.early_identifies += 1
            conn.send({"op": 9, "d": False})
            return
        self.identifies.append(data)
        session = Session(session_id=self._new_session_id(), shard=shard)
        self.sessions[session.session_id] = session
        self._attach(conn, session)
        for event, body in self._ready_payloads(session):
            self._dispatch(session, event, body)
        pending, self._pending = self._pending, []
        for event, body in pending:
            if session.receives(event, body):
                self._dispatch(session, event, body)
            else:
                self._pending.append((event, body))

    def _too_soon(self, shard_id: int) -> bool:
        bucket = shard_id % self.max_concurrency
        now = asyncio.get_running_loop().time()
        if now - self._identified_at.get(bucket, -math.inf) < self.identify_interval:
            return True
        self._identified_at[bucket] = now
        return False

    async def _resume(self, conn: Connection, data: dict[str, Any]) -> None:
        session = self.sessions.get(str(data.get("session_id")))
        if data.get("token") != self._token:
            await conn.ws.close(code=4004, message=b"Authentication failed.")
            return
        if session is None:
            conn.send({"op": 9, "d": False})
            return
        self.resumes += 1
        self._attach(conn, session)
        last = int(data.get("seq") or 0)
        last = min(last, self._rewind.pop(session.session_id, last))
        for seq, text in session.log:
            if seq > last:
                conn.send(text)
        self._dispatch(session, "RESUMED", {"_trace": ["fake-gateway"]})

    def _attach(self, conn: Connection, session: Session) -> None:
        if session.conn is not None and session.conn is not conn:
            session.conn.session = None
        session.conn = conn
        conn.session = session

    def _detach(self, conn: Connection) -> None:
        if conn.session is not None and conn.session.conn is conn:
            conn.session.conn = None
        conn.session = None


def _shard(value: Any) -> tuple[int, int] | None:
    """IDENTIFY's ``shard`` as (id, count): (0, 1) when absent, None when invalid."""
    if value is None:
        return (0, 1)
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) for v in value)
        and 0 <= value[0] < value[1]
    ):
        return (value[0], value[1])
    return None
