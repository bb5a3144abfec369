"""The fake Slack server: lifecycle, Socket Mode, event delivery and test helpers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp import WSMsgType, web
from slack_sdk.signature import SignatureVerifier

from tests.fakes.slack_api.commands import SlashCommands
from tests.fakes.slack_api.model import (
    APP_ID,
    APP_TOKEN,
    BOT_TOKEN,
    BOT_USER_ID,
    SIGNING_SECRET,
    TEAM_ID,
    Envelope,
    PostedMessage,
    State,
)
from tests.fakes.slack_api.uploads import Uploads
from tests.fakes.slack_api.web_api import WebApi


class FakeSlack(SlashCommands, Uploads, WebApi):
    """The fake Slack server; use as ``async with FakeSlack() as slack``.

    Args:
        bot_token: the token ``auth.test`` and other bot methods accept.
        app_token: the token ``apps.connections.open`` accepts.
        signing_secret: signs HTTP event requests (when ``events_url`` is set).
        echo_bot_messages: deliver the bot's own posts back as ``message`` events.
    """

    def __init__(
        self,
        *,
        bot_token: str = BOT_TOKEN,
        app_token: str = APP_TOKEN,
        signing_secret: str = SIGNING_SECRET,
        echo_bot_messages: bool = True,
    ):
        self.bot_token = bot_token
        self.app_token = app_token
        self.signing_secret = signing_secret
        self.echo_bot_messages = echo_bot_messages
        self.events_url: str | None = None  # set to deliver events over HTTP instead of Socket Mode
        self.refuse_sockets = False  # apps.connections.open answers 503 while True
        self.connections = 0  # websocket connections accepted so far
        # Deliver in turn over every open connection, as Slack spreads envelopes over an
        # app's connections (several nodes); else to the newest one.
        self.spread = False
        self._turn = 0
        self.state = State()
        self._init_web_api()
        self._init_uploads()
        self._sockets: list[web.WebSocketResponse] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0

    # ------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> FakeSlack:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/upload/v1/{file_id}", self._receive_upload)
        app.router.add_get("/socket", self._socket)
        app.router.add_get("/files-pri/{file_key}/download/{name}", self._download)
        app.router.add_get("/files-pri/{file_key}/{name}", self._download)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.disconnect()
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def posted(self, channel: str) -> list[PostedMessage]:
        return list(self.state.posted.get(channel, []))

    def reactions(self, channel: str, ts: str) -> set[str]:
        """The bot's current reactions on a message."""
        return set(self.state.reactions.get((channel, ts), set()))

    @property
    def reaction_log(self) -> list[tuple[str, str, str, str]]:
        """``(method, channel, ts, name)`` for every reactions call that succeeded."""
        return list(self.state.reaction_log)

    @property
    def envelopes(self) -> list[Envelope]:
        return list(self.state.envelopes)

    @property
    def downloads(self) -> list[str]:
        """Ids of files downloaded with a valid token."""
        return list(self.state.downloads)

    def calls(self, method: str) -> list[dict[str, Any]]:
        return [params for name, params in self.state.calls if name == method]

    def call_times(self, method: str) -> list[float]:
        """When each call of ``method`` arrived (``time.time()``), in order."""
        calls = zip(self.state.calls, self.state.call_times, strict=True)
        return [at for (name, _), at in calls if name == method]

    @property
    def open_connections(self) -> int:
        """Socket Mode connections currently open."""
        return len(self._open_sockets())

    def unacked(self) -> list[Envelope]:
        return [e for e in self.state.envelopes if e.attempts and not e.acked]

    async def wait_until(
        self, predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition"
    ) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"fake slack: timed out after {timeout}s waiting for {what}")
            await asyncio.sleep(0.01)

    async def wait_for_posted(self, channel: str, n: int, timeout: float = 5.0) -> list[PostedMessage]:
        await self.wait_until(
            lambda: len(self.state.posted.get(channel, [])) >= n, timeout, f"{n} posts in {channel}"
        )
        return self.posted(channel)

    async def wait_for_acks(self, n: int, timeout: float = 5.0) -> None:
        await self.wait_until(lambda: sum(e.acked for e in self.state.envelopes) >= n, timeout, f"{n} acks")

    async def wait_for_connections(self, n: int, timeout: float = 5.0) -> None:
        await self.wait_until(
            lambda: self.connections >= n and bool(self._open_sockets()), timeout, f"{n} sockets"
        )

    # ------------------------------------------------------------ inbound traffic

    async def inject_message(
        self,
        channel: str,
        text: str,
        *,
        user: str = "U0HUMAN01",
        channel_type: str = "im",
        thread_ts: str | None = None,
        mention: bool = False,
        files: list[dict[str, Any]] | None = None,
        bot_id: str | None = None,
        subtype: str | None = None,
        user_profile: dict[str, Any] | None = None,
    ) -> str:
        """Deliver a user's message like Slack does; returns its ``ts``.

        With ``mention`` the text starts with ``<@BOT>`` and, outside DMs, an ``app_mention``
        event follows the ``message`` event (two deliveries, two different ``event_id``\\ s).
        """
        ts = self._next_ts()
        if mention and f"<@{BOT_USER_ID}>" not in text:
            text = f"<@{BOT_USER_ID}> {text}"
        event: dict[str, Any] = {
            "type": "message",
            "channel": channel,
            "user": user,
            "text": text,
            "ts": ts,
            "event_ts": ts,
            "channel_type": channel_type,
            "team": TEAM_ID,
            "client_msg_id": str(uuid.uuid4()),
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
            parent = self.state.authors.get((channel, thread_ts))
            if parent:
                event["parent_user_id"] = parent
        if files:
            event["files"] = files
            event["subtype"] = "file_share"
        if bot_id:
            event["bot_id"] = bot_id
            event["bot_profile"] = {"id": bot_id, "name": f"bot-{bot_id.lower()}", "app_id": "A0OTHER"}
        if subtype:
            event["subtype"] = subtype
        if user_profile:
            event["user_profile"] = user_profile
        self.state.authors[(channel, ts)] = user
        await self.deliver(self.event_callback(event))
        if mention and channel_type != "im":
            mention_event = {k: event[k] for k in ("user", "text", "ts", "channel", "event_ts", "team")}
            mention_event["type"] = "app_mention"
            for key in ("thread_ts", "files"):
                if key in event:
                    mention_event[key] = event[key]
            await self.deliver(self.event_callback(mention_event))
        return ts

    async def inject_event(self, event: Any) -> Envelope:
        """Deliver any event (possibly malformed) wrapped in an ``event_callback``."""
        return await self.deliver(self.event_callback(event))

    def event_callback(self, event: Any) -> dict[str, Any]:
        return {
            "token": "fake-verification-token",
            "team_id": TEAM_ID,
            "api_app_id": APP_ID,
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{next(self._ids):010d}",
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": TEAM_ID,
                    "user_id": BOT_USER_ID,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": f"4-fake-{uuid.uuid4().hex[:8]}",
        }

    async def deliver(self, payload: Any, kind: str = "events_api") -> Envelope:
        """Send one envelope: to ``events_url`` over HTTP when set, else to the newest socket
        or, with :attr:`spread`, the open sockets in turn (or keep it until a socket connects)."""
        envelope = Envelope(envelope_id=str(uuid.uuid4()), payload=payload, kind=kind)
        self.state.envelopes.append(envelope)
        await self._send(envelope)
        return envelope

    async def redeliver_unacked(self) -> int:
        """Send every delivered but unacknowledged envelope again, as a Slack retry."""
        pending = self.unacked()
        for envelope in pending:
            await self._send(envelope)
        return len(pending)

    async def send_raw(self, text: str) -> None:
        """Send a raw text frame to every connected socket."""
        for ws in self._open_sockets():
            await ws.send_str(text)

    async def disconnect(self, *, graceful: bool = False) -> None:
        """Drop every Socket Mode connection (the client has to reconnect).

        With ``graceful`` Slack's ``disconnect`` message (``refresh_requested``) is sent
        instead and the client is left to replace the connection itself.
        """
        if graceful:
            for ws in self._open_sockets():
                await ws.send_json(
                    {
                        "type": "disconnect",
                        "reason": "refresh_requested",
                        "debug_info": {"host": "fake-slack"},
                    }
                )
            return
        for ws in list(self._sockets):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(code=1001, message=b"going away"), 2)
        self._sockets.clear()

    async def post_event(
        self, payload: Any, *, retry_num: int | None = None, secret: str | None = None, form: bool = False
    ) -> tuple[int, str]:
        """POST a payload to ``events_url`` signed like Slack (JSON, or ``payload=`` form data
        for an interactive payload); returns (status, body)."""
        assert self.events_url and self._session is not None, "set events_url first"
        body = urlencode({"payload": json.dumps(payload)}) if form else json.dumps(payload)
        timestamp = str(int(time.time()))
        signature = SignatureVerifier(secret or self.signing_secret).generate_signature(
            timestamp=timestamp, body=body
        )
        headers = {
            "Content-Type": "application/x-www-form-urlencoded" if form else "application/json",
            "X-Slack-Request-Timestamp": timestamp,
            "X-Slack-Signature": signature,
        }
        if retry_num:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = "http_error"
        async with self._session.post(self.events_url, data=body, headers=headers) as resp:
            return resp.status, await resp.text()

    async def _send(self, envelope: Envelope) -> None:
        retry = envelope.attempts
        if self.events_url:
            envelope.attempts += 1
            # Slack posts interactive payloads (block_actions) as a form field, events as JSON.
            form = envelope.kind == "interactive"
            try:
                status, _ = await self.post_event(envelope.payload, retry_num=retry or None, form=form)
            except (aiohttp.ClientError, TimeoutError):
                status = -1  # unacknowledged: Slack retries it
            envelope.acked = envelope.acked or status == 200
            return
        sockets = self._open_sockets()
        if not sockets:
            return  # delivered when a socket connects
        envelope.attempts += 1
        self._turn += 1
        socket = sockets[self._turn % len(sockets)] if self.spread else sockets[-1]
        await socket.send_str(
            json.dumps(
                {
                    "envelope_id": envelope.envelope_id,
                    "type": envelope.kind,
                    "payload": envelope.payload,
                    "accepts_response_payload": False,
                    "retry_attempt": retry,
                    "retry_reason": "timeout" if retry else "",
                }
            )
        )

    def _open_sockets(self) -> list[web.WebSocketResponse]:
        return [ws for ws in self._sockets if not ws.closed]

    # ------------------------------------------------------------ server side

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        self.connections += 1
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._open_sockets()),
                "debug_info": {"host": "fake-slack", "build_number": 1, "approximate_connection_time": 18060},
                "connection_info": {"app_id": APP_ID},
            }
        )
        for envelope in [e for e in self.state.envelopes if not e.attempts and not self.events_url]:
            await self._send(envelope)
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                with contextlib.suppress(ValueError):
                    data = json.loads(msg.data)
                    if isinstance(data, dict) and isinstance(data.get("envelope_id"), str):
                        for envelope in self.state.envelopes:
                            if envelope.envelope_id == data["envelope_id"]:
                                envelope.acked = True
                                envelope.response = data.get("payload", envelope.response)
        finally:
            if ws in self._sockets:
                self._sockets.remove(ws)
        return ws

    def _echo(self, event: dict[str, Any]) -> None:
        self._spawn(self.deliver(self.event_callback(event)))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
