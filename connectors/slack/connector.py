"""The Slack channel: Bolt receives events (Socket Mode or signed HTTP), the Web API replies.

Receiving
    See :mod:`connectors.slack.receiver`: Bolt over Socket Mode or signed HTTP, and an event
    is acknowledged only after the intake returned.

Deduplication
    Slack delivers a mention twice (``message`` and ``app_mention``, each with its own
    ``event_id``) and retries unacknowledged deliveries. The event id is ``"<channel>:<ts>"``;
    events of one chat are handled one at a time, in arrival order, and deliveries already
    committed by this process are acknowledged without a second intake. The pipeline
    dedupes whatever gets past that.

Sending
    The Web API client runs without retry handlers: a 429 comes back at once as ``TRANSIENT``
    with Slack's ``Retry-After`` and the outbox waits and resends (the SDK's default
    connection-error handler would resend ``chat.postMessage`` after a dropped connection,
    which can post twice). Posts use a fresh connection each, so a failure to connect is
    ``TRANSIENT`` and only a failure after the request went out is ``AMBIGUOUS``.

Working indicator
    Bots cannot type in Slack: see :mod:`connectors.slack.working`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from connectors.base import (
    ConnectorHealth,
    ConnectorStartError,
    ErrorClass,
    InboundEvent,
    IntakeHandler,
    OutboundChunk,
    OutboundFile,
    RenderedChunk,
    Sender,
    SendResult,
    ThreadKey,
)
from connectors.interactive import Prompt
from connectors.pacing import PacingPolicy, SendPacer
from connectors.policy import ChannelPolicy
from connectors.slack import buttons
from connectors.slack.commands import CommandThreads, SlashCommands
from connectors.slack.editing import SlackEditor
from connectors.slack.errors import SEND_ERRORS, api_error_code, classify_send_error, may_pass
from connectors.slack.files import FileDownloader
from connectors.slack.inbound import (
    SkipEvent,
    SlackMessage,
    parse_message,
    readable_text,
    sender_name_from_event,
)
from connectors.slack.memory import KeyedLocks, Recent
from connectors.slack.receiver import EventReceiver, IntakeFailedError
from connectors.slack.socket import DEFAULT_RECONNECT, ReconnectBackoff
from connectors.slack.uploads import upload_file
from connectors.slack.working import WorkingReactions
from gateway.backoff import Backoff
from gateway.config import SlackChannel

log = logging.getLogger("talon.slack")

DEFAULT_API_ROOT = "https://slack.com"
_BAD_TOKEN = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "not_allowed_token_type",
    }
)


class SlackConnector:
    """One Slack app (bot user) as a Talon channel.

    Args:
        settings: the channel's settings from talon.yaml.
        files_dir: where inbound attachments are saved (``<files_dir>/<channel>/<chat>[/<thread>]``).
        request_timeout: seconds per Web API call; a send that times out is ``AMBIGUOUS``.
        ping_interval: Socket Mode ping interval; a connection silent for four of these is
            replaced.
        reconnect: delays between failing Socket Mode reconnect attempts (1 s doubling to 60 s).
        working_reaction: the reaction shown on the triggering message during a turn.
    """

    idempotent_send = False

    def __init__(
        self,
        settings: SlackChannel,
        *,
        files_dir: Path,
        request_timeout: float = 30.0,
        ping_interval: float = 10.0,
        reconnect: Backoff = DEFAULT_RECONNECT,
        working_reaction: str = "eyes",
    ) -> None:
        self.name = settings.name
        self.health = ConnectorHealth()
        self.max_file_bytes = settings.max_upload_bytes
        self.settings = settings
        self._files_dir = files_dir
        self._timeout = request_timeout
        self._ping_interval = ping_interval
        self._backoff = ReconnectBackoff(reconnect)
        self._api_root = (settings.api_base_url or DEFAULT_API_ROOT).rstrip("/")
        self._policy = ChannelPolicy.from_settings(settings)
        self._intake: IntakeHandler | None = None
        self._session: aiohttp.ClientSession | None = None
        self._post_session: aiohttp.ClientSession | None = None
        self._poster: AsyncWebClient | None = None
        self.message_editor = SlackEditor(lambda: self._poster, escape_mrkdwn)  # streamed replies
        self._web: AsyncWebClient | None = None
        self._files: FileDownloader | None = None
        self._receiver: EventReceiver | None = None
        self.bot_user_id = ""
        self.bot_id: str | None = None
        self.bot_name = "bot"
        self.team_id: str | None = None
        self._chat_locks: KeyedLocks[str] = KeyedLocks()
        self._committed: Recent[str, bool] = Recent(4096)
        self._bot_threads: Recent[tuple[str, str], bool] = Recent(4096)
        self._names: Recent[str, str] = Recent(1024)
        self._working = WorkingReactions(lambda: self._web, working_reaction, self.name)
        self.pacer = SendPacer(PacingPolicy.from_settings(settings.pacing))  # shared out in a cluster
        self._commands = SlashCommands(
            channel=self.name,
            policy=self._policy,
            intake=lambda: self._intake,
            threads=CommandThreads(self.name),
        )

    @property
    def socket_mode(self) -> bool:
        return bool(self.settings.app_token)

    @property
    def events_url(self) -> str | None:
        """The URL the HTTP Events endpoint listens on, once started without ``app_token``."""
        return self._receiver.events_url if self._receiver else None

    # ------------------------------------------------------------ lifecycle

    async def start(self, intake: IntakeHandler) -> None:
        """Check the bot token with ``auth.test``, then receive events in the background.

        Raises:
            ConnectorStartError: a token is rejected, Slack is unreachable, or the HTTP
                endpoint cannot listen.
        """
        if self._web is not None:
            raise RuntimeError(f"{self.name}: already started")
        self.health.set("starting")
        timeout = aiohttp.ClientTimeout(total=self._timeout)
        self._session = aiohttp.ClientSession(timeout=timeout)
        # A fresh connection per post: on a pooled keep-alive connection the server may have
        # closed, a failure cannot be told apart from one after Slack got the message, and
        # would be reported AMBIGUOUS (never resent) although nothing was posted.
        self._post_session = aiohttp.ClientSession(
            timeout=timeout, connector=aiohttp.TCPConnector(force_close=True)
        )
        self._web = self._client(token=self.settings.bot_token, session=self._session)
        self._poster = self._client(token=self.settings.bot_token, session=self._post_session)
        try:
            await self._authenticate()
            self._files = FileDownloader(
                self._session,
                token=self.settings.bot_token,
                trusted_hosts={urlsplit(self._api_root).hostname or ""},
                max_bytes=self.settings.max_attachment_bytes,
                read_timeout=self._timeout,
            )
            self._intake = intake
            self._receiver = EventReceiver(
                self.settings,
                web=self._web,
                bolt_client=self._client(token=None, session=self._session),
                identity=AuthorizeResult(
                    enterprise_id=None,
                    team_id=self.team_id,
                    bot_token=self.settings.bot_token,
                    bot_user_id=self.bot_user_id,
                    bot_id=self.bot_id,
                ),
                on_event=self._on_event,
                health=self.health,
                timeout=self._timeout,
                ping_interval=self._ping_interval,
                backoff=self._backoff,
                on_command=self._commands.handle,
                on_tap=self._on_tap,
            )
            await self._receiver.start()
        except BaseException as exc:
            await self._shutdown()
            self.health.set("failed", str(exc) if isinstance(exc, ConnectorStartError) else "could not start")
            raise
        self.health.set("connected")
        log.info(
            "slack channel started",
            extra={
                "channel": self.name,
                "mode": "socket" if self.socket_mode else "http",
                "bot": self.bot_user_id,
            },
        )

    async def stop(self) -> None:
        """Stop receiving, cancel background work and close connections. Idempotent."""
        self._intake = None
        await self._shutdown()
        self.health.set("stopped")

    async def _shutdown(self) -> None:
        receiver, self._receiver = self._receiver, None
        if receiver is not None:
            await receiver.stop()
        for session in (self._session, self._post_session):
            if session is not None:
                await session.close()
        self._session = self._post_session = None
        self._web = self._poster = None
        self._files = None

    def _client(self, *, token: str | None, session: aiohttp.ClientSession | None) -> AsyncWebClient:
        # retry_handlers=[]: every failure reaches the outbox once; see the module docstring.
        return AsyncWebClient(
            token=token,
            base_url=f"{self._api_root}/api/",
            session=session,
            timeout=int(max(1, self._timeout)),
            retry_handlers=[],
            logger=logging.getLogger("talon.slack.web"),
        )

    async def _authenticate(self) -> None:
        assert self._web is not None
        try:
            resp = await self._web.auth_test()
        except SlackApiError as err:
            code = api_error_code(err)
            if code in _BAD_TOKEN:
                raise ConnectorStartError(
                    f"{self.name}: Slack rejected the bot token ({code}); set SLACK_BOT_TOKEN to the app's "
                    "Bot User OAuth Token (xoxb-...) from the app's OAuth & Permissions page"
                ) from None
            raise ConnectorStartError(
                f"{self.name}: auth.test failed ({code}); check bot_token and api_base_url",
                transient=may_pass(err),
            ) from None
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ConnectorStartError(
                f"{self.name}: cannot reach the Slack Web API at {self._api_root} ({type(exc).__name__}); "
                "check network access and api_base_url",
                transient=True,
            ) from None
        user_id, bot_id = resp.get("user_id"), resp.get("bot_id")
        if not isinstance(user_id, str) or not user_id or not bot_id:
            raise ConnectorStartError(
                f"{self.name}: bot_token is not a bot token (auth.test names no bot); use the app's "
                "Bot User OAuth Token (xoxb-...)"
            )
        self.bot_user_id, self.bot_id = user_id, str(bot_id)
        self.bot_name = str(resp.get("user") or "bot")
        self.team_id = resp.get("team_id")

    # ------------------------------------------------------------ inbound

    async def _on_tap(self, body: dict[str, Any]) -> str | None:
        """A prompt's button or select (``block_actions``): committed through intake; raises
        :class:`IntakeFailedError` when intake fails, so the tap is not acknowledged."""
        event = buttons.read_tap(self.name, body)
        if event is None or not self._policy.admits(event.sender.id, event.thread_key.chat_id):
            return None
        intake = self._intake
        if intake is None:
            raise IntakeFailedError(f"{self.name} is stopping")
        try:
            result = await intake(event)
        except Exception as exc:
            raise IntakeFailedError(f"intake failed for a tap: {type(exc).__name__}") from exc
        return result.reply

    async def send_prompt(self, thread: ThreadKey, prompt: Prompt) -> SendResult:
        """A message with Block Kit buttons or a select (:mod:`connectors.interactive`)."""
        if self._web is None:
            return SendResult.failed(ErrorClass.TRANSIENT, f"{self.name} is not running")
        return await buttons.send_prompt(self._web, thread, prompt)

    async def close_prompt(self, thread: ThreadKey, message_id: str, text: str) -> None:
        """The prompt's blocks replaced by its outcome (``chat.update``). Never raises."""
        if self._web is not None:
            await buttons.close_prompt(self._web, thread, message_id, text)

    async def _on_event(self, body: dict[str, Any]) -> None:
        """Bolt listener for ``message`` and ``app_mention``; raises only when intake fails."""
        event = body.get("event")
        try:
            msg = parse_message(event, bot_user_id=self.bot_user_id, bot_id=self.bot_id)
        except SkipEvent as skip:
            level = logging.WARNING if skip.malformed else logging.DEBUG
            log.log(level, "skipped slack event: %s", skip.reason, extra={"channel": self.name})
            return
        if not self._policy.admits(msg.sender, msg.channel, is_bot=msg.is_bot):
            return
        # One event at a time per chat: messages are committed in the order Slack sent them
        # (a slow download or name lookup cannot let a later message overtake), and the
        # second delivery of a mention finds the first one committed.
        async with self._chat_locks.hold(msg.channel):
            if msg.event_id in self._committed:
                return
            intake = self._intake
            if intake is None:
                raise IntakeFailedError(f"{self.name} is stopping")  # Slack redelivers after restart
            inbound = await self._inbound_event(msg, body)
            try:
                await intake(inbound)
            except Exception as exc:
                log.warning(
                    "%s: intake failed for %s (%s: %s); not acknowledged, Slack will redeliver it",
                    self.name,
                    msg.event_id,
                    type(exc).__name__,
                    exc,
                    extra={"channel": self.name, "event_id": msg.event_id},
                )
                raise IntakeFailedError(msg.event_id) from exc
            self._committed.put(msg.event_id, True)
            if inbound.needs_reply:
                self._working.triggered(inbound.thread_key, msg.ts)
                self._commands.threads.addressed(inbound.thread_key, msg.sender)

    async def _inbound_event(self, msg: SlackMessage, body: dict[str, Any]) -> InboundEvent:
        key = msg.thread_key(self.name)
        mentioned = msg.mentions(self.bot_user_id)
        replied = msg.in_thread and (
            msg.parent_user_id == self.bot_user_id or (msg.channel, msg.thread_ts or "") in self._bot_threads
        )
        text = readable_text(msg.text, bot_user_id=self.bot_user_id, bot_name=self.bot_name)
        needs_reply = self._policy.wants_reply(
            msg.chat_type, text, mentioned=mentioned, replied_to_bot=replied
        )
        attachments = ()
        if msg.files and self._files is not None:
            dest = self._files_dir / self.name / msg.channel
            if key.topic:
                dest = dest / key.topic
            downloads = await self._files.fetch_all(msg.files, dest)
            attachments = tuple(downloads.attachments)
            text = "\n".join(part for part in (text, *downloads.notes) if part)
        return InboundEvent(
            channel=self.name,
            event_id=msg.event_id,
            thread_key=key,
            chat_type=msg.chat_type,
            sender=Sender(id=msg.sender, display_name=await self._display_name(msg, body), is_bot=msg.is_bot),
            text=text,
            mentions_bot=mentioned,
            needs_reply=needs_reply,
            reply_to=msg.thread_ts if msg.in_thread else None,
            attachments=attachments,
            platform_message_id=msg.ts,
            raw=body,
        )

    async def _display_name(self, msg: SlackMessage, body: dict[str, Any]) -> str:
        event = body.get("event") or {}
        name = sender_name_from_event(event)
        if name:
            return name
        cached = self._names.get(msg.sender)
        if cached:
            return cached
        if self._web is None or not msg.sender.startswith(("U", "W")):
            return msg.sender
        try:
            resp = await self._web.users_info(user=msg.sender)
        except SlackApiError as err:
            # Permanent for this user (missing users:read, user_not_found): remember the id.
            log.debug("users.info failed: %s", api_error_code(err), extra={"channel": self.name})
            self._names.put(msg.sender, msg.sender)
            return msg.sender
        except (aiohttp.ClientError, TimeoutError):
            return msg.sender
        user = resp.get("user") or {}
        profile = user.get("profile") or {}
        name = (
            profile.get("display_name")
            or profile.get("real_name")
            or user.get("real_name")
            or user.get("name")
        )
        name = str(name) if name else msg.sender
        self._names.put(msg.sender, name)
        return name

    # ------------------------------------------------------------ outbound

    def render(self, markdown: str) -> list[RenderedChunk]:
        """Markdown -> Slack mrkdwn chunks within Slack's message limit."""
        from connectors.render import render_markdown

        return render_markdown(markdown, "slack")

    async def send(self, item: OutboundChunk) -> SendResult:
        """Post one chunk with ``chat.postMessage``, in the thread of ``item.thread``.

        Never raises for Slack or network errors; see :func:`classify_send_error`.
        """
        web_client = self._poster
        if web_client is None:
            return SendResult.failed(ErrorClass.TRANSIENT, f"{self.name} is not running")
        chunk = item.chunk
        is_mrkdwn = chunk.format == "mrkdwn"
        text = chunk.text if is_mrkdwn else escape_mrkdwn(chunk.plain or chunk.text)
        channel = item.thread.chat_id
        thread_ts = item.thread.topic
        if thread_ts is None and item.reply_to and not channel.startswith("D"):
            thread_ts = item.reply_to
        kwargs: dict[str, Any] = {
            "channel": channel,
            "text": text,
            "mrkdwn": is_mrkdwn,
            "unfurl_links": False,
        }
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        try:
            async with self.pacer.slot(channel, group=not channel.startswith("D")):
                resp = await web_client.chat_postMessage(**kwargs)
        except SEND_ERRORS as exc:
            result = classify_send_error(exc)
            if result.retry_after:
                self.pacer.hold(channel, result.retry_after)
            log.warning(
                "%s: delivery %s failed (%s): %s",
                self.name,
                item.delivery_id,
                result.error_class,
                result.error,
                extra={"channel": self.name, "delivery": item.delivery_id},
            )
            return result
        ts = resp.get("ts")
        root = thread_ts or ts
        if isinstance(root, str):
            self._bot_threads.put((channel, root), True)
        return SendResult.sent(ts if isinstance(ts, str) else None)

    async def send_file(self, item: OutboundFile) -> SendResult:
        """Share one file in the thread of ``item.thread`` (:mod:`connectors.slack.uploads`)."""
        web_client, session = self._poster, self._post_session
        if web_client is None or session is None:
            return SendResult.failed(ErrorClass.TRANSIENT, f"{self.name} is not running")
        channel = item.thread.chat_id
        result = await self.pacer.send(
            channel,
            lambda: upload_file(web_client, session, item, timeout=max(self._timeout, 60.0)),
            group=not channel.startswith("D"),
        )
        if not result.ok:
            log.warning(
                "%s: file delivery %s failed (%s): %s",
                self.name,
                item.delivery_id,
                result.error_class,
                result.error,
            )
        return result

    async def set_working(self, thread: ThreadKey, working: bool) -> None:
        """Add (or remove) the working reaction on the message that triggered the turn."""
        await self._working.set_working(thread, working)


def escape_mrkdwn(text: str) -> str:
    """Escape the three characters Slack treats as markup in any message text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
