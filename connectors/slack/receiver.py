"""Receiving Slack events: Bolt over Socket Mode or the HTTP Events API, acked after commit.

Bolt runs with ``process_before_response=True``, so the listener (policy check, downloads,
intake) finishes before Bolt produces its response. In Socket Mode the receiver reads the
envelopes from slack_sdk's ``SocketModeClient`` itself and acks one only when Bolt's
response is not a 5xx: a listener that raises :class:`IntakeFailedError` leaves the envelope
unacked and Slack redelivers it. In HTTP mode the same 500 makes Slack retry the request.
In HTTP mode the request signature (``signing_secret``) is verified before the body is
parsed (401 when it is wrong); a signed body that is not acceptable JSON is answered 400,
one larger than :data:`MAX_EVENT_BYTES` 413. Bolt answers ``url_verification``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.adapter.socket_mode.internals import build_headers
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.web.async_client import AsyncWebClient

from connectors.base import ConnectorHealth, ConnectorStartError
from connectors.slack.errors import api_error_code, may_pass
from connectors.slack.socket import MAX_EVENT_BYTES, BackoffSocketModeClient, ReconnectBackoff
from gateway.config import SlackChannel
from gateway.errors import TransientError
from gateway.jsonsafe import JSONInputError, loads

log = logging.getLogger("talon.slack")

EventHandler = Callable[[dict[str, Any]], Awaitable[None]]
CommandHandler = Callable[[dict[str, Any]], Awaitable[str | None]]
"""Handles a slash command payload; returns the answer the acknowledgement carries, if any."""


class IntakeFailedError(TransientError):
    """Raised by the event handler when the gateway could not commit an event; the event is
    then not acknowledged and Slack redelivers it."""


class EventReceiver:
    """Runs Bolt for one Slack app and feeds ``message`` / ``app_mention`` payloads to a handler.

    Args:
        settings: the channel settings (``app_token`` selects Socket Mode, else HTTP).
        web: a Web API client with the bot token (opens Socket Mode connections).
        bolt_client: a token-less Web API client for Bolt's request context.
        identity: the bot as ``auth.test`` described it.
        on_event: called with the ``event_callback`` body of each message event; raises
            :class:`IntakeFailedError` to withhold the acknowledgement.
        health: updated with the Socket Mode connection state.
        timeout: seconds for opening the first connection.
        ping_interval: Socket Mode ping interval.
        backoff: delays between failing reconnect attempts.
        on_command: called with each slash command payload (:mod:`connectors.slack.commands`).
        on_tap: called with each ``block_actions`` payload of a prompt's buttons.
    """

    def __init__(
        self,
        settings: SlackChannel,
        *,
        web: AsyncWebClient,
        bolt_client: AsyncWebClient,
        identity: AuthorizeResult,
        on_event: EventHandler,
        health: ConnectorHealth,
        timeout: float,
        ping_interval: float,
        backoff: ReconnectBackoff,
        on_command: CommandHandler | None = None,
        on_tap: CommandHandler | None = None,
    ):
        self.name = settings.name
        self._on_command = on_command
        self._on_tap = on_tap
        self.settings = settings
        self._web = web
        self._identity = identity
        self._on_event = on_event
        self._health = health
        self._timeout = timeout
        self._ping_interval = ping_interval
        self._backoff = backoff
        self._app = self._build_app(bolt_client)
        self._verifier: SignatureVerifier | None = None  # HTTP mode only
        self._socket: BackoffSocketModeClient | None = None
        self._runner: web.AppRunner | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._stopping = False
        self.events_url: str | None = None

    @property
    def socket_mode(self) -> bool:
        return bool(self.settings.app_token)

    async def start(self) -> None:
        """Open the Socket Mode connection or the HTTP endpoint.

        Raises:
            ConnectorStartError: the app token is refused, Slack is unreachable, or the
                HTTP endpoint cannot listen.
        """
        if self.socket_mode:
            await self._start_socket()
        else:
            await self._start_http()

    async def stop(self) -> None:
        self._stopping = True
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        socket, self._socket = self._socket, None
        if socket is not None:
            try:
                await socket.close()
            except Exception as exc:
                log.debug("closing the Socket Mode client failed: %s", type(exc).__name__)
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        self.events_url = None

    def _build_app(self, bolt_client: AsyncWebClient) -> AsyncApp:
        async def authorize(enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
            # Known from auth.test at start; Bolt would otherwise call auth.test again and
            # drop the event (answering 200) if that call failed.
            return self._identity

        app = AsyncApp(
            name=f"talon-{self.name}",
            logger=logging.getLogger("talon.slack.bolt"),
            client=bolt_client,
            authorize=authorize,
            signing_secret=self.settings.signing_secret or "",
            process_before_response=True,
            # Signatures are verified by _on_http, before the body is parsed.
            request_verification_enabled=False,
        )
        app.error(self._on_bolt_error)
        app.event("message")(self._on_message_event)
        app.event("app_mention")(self._on_message_event)
        app.command(re.compile(r"^/"))(self._on_slash_command)
        app.action(re.compile(r"^t:"))(self._on_action)  # buttons of connectors.slack.buttons
        # Any other subscribed event is acknowledged so Slack does not keep retrying it.
        app.event(re.compile(r".+"))(self._on_other_event)
        return app

    async def _on_message_event(self, body: dict[str, Any]) -> None:
        await self._on_event(body)

    async def _on_slash_command(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        reply = await self._on_command(body) if self._on_command is not None else None
        if reply:
            await ack(text=reply, response_type="ephemeral")
        else:
            await ack()

    async def _on_action(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """A tap: committed through intake (raising withholds the ack), then acknowledged."""
        if self._on_tap is not None:
            await self._on_tap(body)
        await ack()

    async def _on_other_event(self, body: dict[str, Any]) -> None:
        event = body.get("event") or {}
        log.debug("ignored slack event %s", event.get("type"), extra={"channel": self.name})

    async def _on_bolt_error(self, error: Exception) -> None:
        # Bolt answers 500 after this either way; an intake failure was logged already.
        if not isinstance(error, IntakeFailedError):
            log.error("slack event handling failed", exc_info=error, extra={"channel": self.name})

    # ------------------------------------------------------------ Socket Mode

    async def _start_socket(self) -> None:
        app_token = self.settings.app_token or ""
        try:
            opened = await self._web.apps_connections_open(app_token=app_token)
        except SlackApiError as err:
            code = api_error_code(err)
            hint = {
                "not_allowed_token_type": "it is not an app-level token; use the xapp-... token",
                "missing_scope": "the app-level token needs the connections:write scope",
            }.get(code, "set SLACK_APP_TOKEN to an app-level token (xapp-...) with connections:write")
            if may_pass(err):
                raise ConnectorStartError(
                    f"{self.name}: Slack could not open Socket Mode for now ({code})", transient=True
                ) from None
            raise ConnectorStartError(
                f"{self.name}: Slack refused the app token for Socket Mode ({code}); {hint}, and enable "
                "Socket Mode in the app settings"
            ) from None
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ConnectorStartError(
                f"{self.name}: cannot reach Slack to open Socket Mode ({type(exc).__name__}); "
                "check network access",
                transient=True,
            ) from None
        client = BackoffSocketModeClient(
            backoff=self._backoff,
            on_problem=self._socket_problem,
            app_token=app_token,
            logger=logging.getLogger("talon.slack.socket"),
            web_client=self._web,
            ping_interval=self._ping_interval,
        )
        client.message_listeners.append(self._on_socket_message)
        self._socket = client
        client.wss_uri = opened["url"]
        try:
            async with asyncio.timeout(self._timeout):
                await client.connect()
        except TimeoutError:
            raise ConnectorStartError(
                f"{self.name}: the Socket Mode websocket did not open within {self._timeout:g}s; "
                "check network access to Slack",
                transient=True,
            ) from None
        self._watcher = asyncio.create_task(self._watch_socket())

    async def _on_socket_message(
        self, client: AsyncBaseSocketModeClient, message: dict[str, Any], raw: str | None
    ) -> None:
        """Dispatch one envelope through Bolt and ack it unless the intake failed."""
        kind = message.get("type")
        if kind not in ("events_api", "slash_commands", "interactive"):
            return  # hello / disconnect: the SDK client handles those
        envelope_id = message.get("envelope_id")
        if not isinstance(envelope_id, str) or not envelope_id:
            log.warning("skipped a Socket Mode envelope without envelope_id", extra={"channel": self.name})
            return
        if not _well_formed(kind, message.get("payload")):
            log.warning(
                "skipped a malformed Socket Mode envelope", extra={"channel": self.name, "type": kind}
            )
            await self._ack(client, envelope_id)
            return
        request = SocketModeRequest.from_dict(message)
        assert request is not None
        bolt_req = AsyncBoltRequest(mode="socket_mode", body=request.payload, headers=build_headers(request))
        response = await self._app.async_dispatch(bolt_req)
        if response.status >= 500:
            return  # not acked: Slack redelivers
        await self._ack(client, envelope_id, _ack_payload(response.body))

    async def _ack(
        self, client: AsyncBaseSocketModeClient, envelope_id: str, payload: dict[str, Any] | None = None
    ) -> None:
        # A slash command's answer rides on its acknowledgement, as over HTTP.
        ack: dict[str, Any] = {"envelope_id": envelope_id}
        if payload:
            ack["payload"] = payload
        try:
            await client.send_socket_mode_response(ack)
        except Exception as exc:
            # Slack redelivers; the event id makes that harmless.
            log.info("could not acknowledge envelope: %s", type(exc).__name__, extra={"channel": self.name})

    def _socket_problem(self, reason: str) -> None:
        if not self._stopping:
            self._health.set("reconnecting", reason)
            log.warning("slack socket mode: %s", reason, extra={"channel": self.name})

    async def _watch_socket(self) -> None:
        """Mirror the SDK client's connection state into ``health``."""
        interval = min(1.0, self._ping_interval / 2)
        while not self._stopping:
            await asyncio.sleep(interval)
            socket = self._socket
            if socket is None:
                return
            if await socket.is_connected():
                if self._health.state != "connected":
                    log.info("slack socket mode connected again", extra={"channel": self.name})
                self._health.set("connected")
            elif self._health.state == "connected":
                self._health.set("reconnecting", "Socket Mode connection lost; reconnecting")
                log.warning("slack socket mode connection lost; reconnecting", extra={"channel": self.name})

    # ------------------------------------------------------------ HTTP Events API

    async def _start_http(self) -> None:
        settings = self.settings
        if not settings.signing_secret:
            raise ConnectorStartError(
                f"{self.name}: without app_token Slack events arrive over HTTP, which needs signing_secret; "
                "set SLACK_SIGNING_SECRET (app settings > Basic Information) or SLACK_APP_TOKEN for Socket Mode"
            )
        self._verifier = SignatureVerifier(settings.signing_secret)
        webapp = web.Application(client_max_size=MAX_EVENT_BYTES)
        webapp.router.add_post(settings.http_path, self._on_http)
        runner = web.AppRunner(webapp, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, settings.http_host, settings.http_port).start()
        except OSError as exc:
            await runner.cleanup()
            raise ConnectorStartError(
                f"{self.name}: cannot listen on {settings.http_host}:{settings.http_port} for Slack events "
                f"({exc.strerror or exc}); free the port or change http_port"
            ) from None
        self._runner = runner
        host, port = runner.addresses[0][:2]
        host = f"[{host}]" if ":" in host else host
        self.events_url = f"http://{host}:{port}{settings.http_path}"

    async def _on_http(self, request: web.Request) -> web.Response:
        if self._stopping:
            return web.Response(status=503)
        body = _utf8(await request.read())  # aiohttp answers 413 past client_max_size
        if body is None or not self._signed(body, request.headers):
            return web.json_response({"error": "invalid request"}, status=401)
        problem = _body_problem(body, request.content_type)
        if problem is not None:
            log.warning("refused a signed Slack request: %s", problem, extra={"channel": self.name})
            return web.json_response({"error": problem}, status=400)
        bolt_request = AsyncBoltRequest(
            body=body,
            query=request.query_string,
            headers=request.headers,  # type: ignore[arg-type]
        )
        return await to_aiohttp_response(await self._app.async_dispatch(bolt_request))

    def _signed(self, body: str, headers: Mapping[str, str]) -> bool:
        assert self._verifier is not None
        try:
            return self._verifier.is_valid(
                body, headers.get("X-Slack-Request-Timestamp"), headers.get("X-Slack-Signature")
            )
        except ValueError:  # a timestamp that is not a number
            return False


def _utf8(raw: bytes) -> str | None:
    """The body as text; None when it is not UTF-8 (Slack signs text, so it cannot be signed)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _body_problem(body: str, content_type: str) -> str | None:
    """Why Bolt could not use ``body``, or None.

    Looks for JSON where Bolt does (``slack_bolt.request.internals.parse_body``): the whole
    body when it is JSON, else a form's ``payload`` field; other forms have none.
    """
    document: str | None = body
    if body and content_type != "application/json" and not body.startswith("{"):
        document = dict(parse_qsl(body, keep_blank_values=True)).get("payload") if "payload" in body else None
    if not document:
        return None
    try:
        value = loads(document, max_bytes=MAX_EVENT_BYTES)
    except JSONInputError as exc:
        return f"body must be JSON: {exc}"
    return None if isinstance(value, dict) else "body must be a JSON object"


def _ack_payload(body: str) -> dict[str, Any] | None:
    """Bolt's response body as an acknowledgement's payload: a JSON object, or None."""
    if not body or not body.startswith("{"):
        return None
    try:
        value = loads(body, max_bytes=MAX_EVENT_BYTES)
    except JSONInputError:
        return None
    return value if isinstance(value, dict) else None


def _well_formed(kind: str, payload: Any) -> bool:
    if kind != "events_api":
        return isinstance(payload, dict | str)
    if not isinstance(payload, dict):
        return False
    if payload.get("type") != "event_callback":
        return True
    event = payload.get("event")
    return isinstance(event, dict) and isinstance(event.get("type"), str)
