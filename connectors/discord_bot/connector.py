"""The Discord channel: discord.py's gateway client in, REST messages out."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any

import aiohttp
import discord

from connectors.base import (
    ConnectorHealth,
    ConnectorStartError,
    ErrorClass,
    InboundEvent,
    IntakeHandler,
    OutboundChunk,
    OutboundFile,
    ReceiveGates,
    RenderedChunk,
    SendResult,
    ThreadKey,
)
from connectors.discord_bot import buttons
from connectors.discord_bot.client import TalonDiscordClient, api_base_for
from connectors.discord_bot.commands import ApplicationCommands, register_commands
from connectors.discord_bot.editing import DiscordEditor
from connectors.discord_bot.inbound import InboundBuilder, RecentIds
from connectors.discord_bot.lanes import Lanes
from connectors.discord_bot.outbound import DiscordSender, request_trace
from connectors.discord_bot.sessions import (
    IDENTIFY_INTERVAL,
    GatewaySession,
    IdentifyPacer,
    TokenRejectedError,
    receiver_name,
)
from connectors.discord_bot.working import TypingIndicators
from connectors.interactive import Prompt
from connectors.pacing import PacingPolicy, SendPacer
from connectors.policy import ChannelPolicy
from gateway.backoff import Backoff
from gateway.config import DiscordChannel

log = logging.getLogger("talon.connectors.discord")

# discord.py sleeps through shorter rate-limit waits itself; longer ones come back to the
# outbox as TRANSIENT with retry_after (30 s is the smallest value discord.py accepts).
_MAX_RATELIMIT_WAIT = 30.0
_LOGIN_TIMEOUT = 30.0
# The next message of the chat waits behind a failing intake: a fixed, short schedule.
DEFAULT_INTAKE_RETRY = Backoff(base=0.5, max=30.0, jitter=0)

_Item = tuple[discord.Message, dict[str, Any]]


class DiscordConnector:
    """A Discord bot account as a Talon channel.

    Messages arrive over discord.py's gateway connection (guild text channels, threads and
    DMs), one session per shard with ``shard_count`` above 1 (:mod:`.sessions`); discord.py
    reconnects and resumes on its own, and the sessions' state is mirrored in
    :attr:`health`. Sending, commands and typing go over REST through a client of their own.
    The gateway has no acknowledgement: if the intake raises, the connector
    itself retries that message (same ``event_id``, so the pipeline deduplicates) with capped
    backoff before the next message of the same chat; a message is lost only if the process
    stops before its intake succeeds.

    Args:
        settings: the channel's settings.
        files_dir: inbound attachments are saved under ``files_dir/<channel>/<chat>[/<thread>]``.
        send_timeout: seconds one :meth:`send` may take (default ``settings.send_timeout`` or 60).
        intake_retry: delays before retrying a failed intake (0.5 s doubling to 30 s).
        intake_attempts: intake tries per message before it is dropped with an error log.
        identify_interval: seconds between two session starts of one identify bucket (Discord
            allows one per 5 s; the default leaves half a second for the way there).
    """

    idempotent_send = False
    # Two gateway sessions of one shard would each receive its events: in a cluster one node
    # at a time holds each shard's session (connectors/base.py); every node sends over REST.
    single_receiver = True

    def __init__(
        self,
        settings: DiscordChannel,
        *,
        files_dir: Path,
        send_timeout: float | None = None,
        intake_retry: Backoff = DEFAULT_INTAKE_RETRY,
        intake_attempts: int = 8,
        identify_interval: float = IDENTIFY_INTERVAL,
    ) -> None:
        self.name = settings.name
        self.health = ConnectorHealth()
        self.max_file_bytes = settings.max_upload_bytes
        self._settings = settings
        self._files_dir = Path(files_dir)
        self._send_timeout = float(send_timeout or getattr(settings, "send_timeout", None) or 60.0)
        self._intake_retry = intake_retry
        self._intake_attempts = max(1, intake_attempts)
        self._api_base = api_base_for(settings.api_base_url)
        self._policy = ChannelPolicy.from_settings(settings)
        self._sent_ids = RecentIds()
        self._dm_chats: set[str] = set()
        self.pacer = SendPacer(PacingPolicy.from_settings(settings.pacing))  # shared out in a cluster
        self._intake: IntakeHandler | None = None
        self._client: TalonDiscordClient | None = None
        self._builder: InboundBuilder | None = None
        self._sender: DiscordSender | None = None
        self.message_editor = DiscordEditor(lambda: self._client, self._dm_chats)  # streamed replies
        self._typing: TypingIndicators | None = None
        self._lanes: Lanes[_Item] = Lanes(self._process)
        self._runner: asyncio.Task[None] | None = None
        self._sessions: list[GatewaySession] = []
        self._identify_interval = identify_interval
        self.receive_gates: ReceiveGates | None = None  # set by a cluster node (connectors/base.py)
        self._stopping = False
        self._commands = ApplicationCommands(
            channel=self.name, client=lambda: self._client, policy=self._policy, intake=lambda: self._intake
        )
        self._taps = buttons.ComponentTaps(
            channel=self.name, client=lambda: self._client, policy=self._policy, intake=lambda: self._intake
        )
        self._interactions: set[asyncio.Task[None]] = set()

    # ---------------------------------------------------------------- lifecycle

    async def start(self, intake: IntakeHandler) -> None:
        """Check the token, then run the gateway connection in the background.

        Raises:
            ConnectorStartError: the token is empty or rejected, or the API is unreachable.
        """
        if self._client is not None:
            return
        self._intake = intake
        client = await self._login()
        self._bind(client)
        me = client.user
        log.info("discord channel %s logged in as %s (%s)", self.name, me, me.id if me else "?")
        await register_commands(client, self.name)
        self._sessions = await self._new_sessions(client)
        self._on_session_change()
        self._runner = asyncio.create_task(self._receive(), name=f"discord-gateway-{self.name}")

    async def stop(self) -> None:
        """Stop receiving, cancel background work and close the HTTP session. Idempotent."""
        if self._stopping:
            return
        self._stopping = True
        await asyncio.gather(*(session.close() for session in self._sessions))
        client = self._client
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._runner
        await self._lanes.close()
        for task in list(self._interactions):
            task.cancel()
        await asyncio.gather(*self._interactions, return_exceptions=True)
        if self._typing is not None:
            await self._typing.close()
        self.health.set("stopped")

    def _new_client(self, session: GatewaySession | None, pacer: IdentifyPacer | None) -> TalonDiscordClient:
        sharded = session is not None and session.shard[1] > 1
        return TalonDiscordClient(
            on_message=self._on_message,
            on_state=session.set_state if session is not None else lambda state, detail: None,
            on_interaction=self._on_interaction,
            api_base=self._api_base,
            gateway_url=self._settings.gateway_url,
            http_trace=request_trace(),
            max_ratelimit_timeout=_MAX_RATELIMIT_WAIT,
            shard=session.shard if sharded else None,
            before_identify=pacer.wait if pacer is not None and sharded else None,
        )

    async def _new_sessions(self, client: TalonDiscordClient) -> list[GatewaySession]:
        """The gateway sessions of this bot: one, or one per shard, each with its gate."""
        count = self._settings.shard_count
        pacer = IdentifyPacer(await self._max_concurrency(client, count), self._identify_interval)
        gates = self.receive_gates
        return [
            GatewaySession(
                channel=self.name,
                shard=(shard, count),
                login=lambda session: self._login(session, pacer),
                gate=gates(receiver_name(shard, count)) if gates is not None else None,
                on_change=self._on_session_change,
            )
            for shard in range(count)
        ]

    async def _max_concurrency(self, client: TalonDiscordClient, count: int) -> int:
        """How many sessions Discord starts at once for this bot (1 when unsharded or unknown);
        warns when Discord recommends more shards than configured."""
        if count == 1:
            return 1
        try:
            recommended, _, limits = await client.http.get_bot_gateway()
        except (discord.DiscordException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.warning(
                "discord channel %s: GET /gateway/bot failed (%r); starting shards one by one", self.name, exc
            )
            return 1
        if int(recommended) > count:
            log.warning(
                "discord channel %s: Discord recommends %s shards and shard_count is %d; raise it",
                self.name,
                recommended,
                count,
            )
        return int(limits.get("max_concurrency") or 1)

    async def _login(
        self, session: GatewaySession | None = None, pacer: IdentifyPacer | None = None
    ) -> TalonDiscordClient:
        """A logged-in client: the connector's own for REST (``session`` None), or one for a
        gateway session."""
        token = self._settings.token.strip()
        if not token:
            raise ConnectorStartError(
                f"{self.name}: the Discord bot token is empty; set DISCORD_BOT_TOKEN (or this "
                "channel's token) to the token from the Discord Developer Portal (Bot -> Reset Token)"
            )
        client = self._new_client(session, pacer)
        where = self._api_base or "discord.com"
        try:
            async with asyncio.timeout(_LOGIN_TIMEOUT):
                await client.login(token)
                if self._api_base and not self._settings.gateway_url:
                    _, url, _ = await client.http.get_bot_gateway()
                    client.set_gateway_url(url)
        except discord.LoginFailure:
            await client.close()
            raise TokenRejectedError(
                f"{self.name}: Discord rejected the bot token (401 Unauthorized); copy a fresh token "
                "from the Discord Developer Portal (your application -> Bot -> Reset Token) into "
                "DISCORD_BOT_TOKEN"
            ) from None
        except discord.GatewayNotFound:
            await client.close()
            raise ConnectorStartError(
                f"{self.name}: {where} did not return a gateway URL; set gateway_url for this channel",
                transient=True,
            ) from None
        except discord.HTTPException as exc:
            await client.close()
            raise ConnectorStartError(
                f"{self.name}: Discord answered {exc.status} while checking the bot token: {exc.text}",
                transient=exc.status >= 500 or exc.status == 429,
            ) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            await client.close()
            raise ConnectorStartError(
                f"{self.name}: cannot reach the Discord API at {where} ({exc!r}); check the network "
                "or this channel's api_base_url",
                transient=True,
            ) from None
        return client

    def _bind(self, client: TalonDiscordClient) -> None:
        self._client = client
        self._builder = InboundBuilder(
            channel=self.name,
            client=client,
            policy=self._policy,
            files_dir=self._files_dir,
            max_attachment_bytes=self._settings.max_attachment_bytes,
            sent_ids=self._sent_ids,
        )
        self._builder.dm_chats = self._dm_chats
        self._sender = DiscordSender(
            client, send_timeout=self._send_timeout, sent_ids=self._sent_ids, dm_chats=self._dm_chats
        )
        self._typing = TypingIndicators(client, interval=self._settings.typing_interval)

    async def _receive(self) -> None:
        await asyncio.gather(*(session.run() for session in self._sessions))

    def _on_session_change(self) -> None:
        """The channel's health from its sessions': failed or reconnecting if one is; connected
        once every session this node holds is, and while another node holds them all."""
        if self._stopping or self.health.state == "failed":
            return
        sessions = self._sessions
        here = [s for s in sessions if s.state != "waiting"]
        failed = next((s for s in sessions if s.state == "failed"), None)
        down = next((s for s in here if s.state == "reconnecting"), None)
        if failed is not None:
            self.health.set("failed", _labelled(failed, failed.detail))
        elif not here:
            # Sending works meanwhile: only the gateway sessions wait for this node's turn.
            where = "every shard's gateway session is" if len(sessions) > 1 else "the gateway session is"
            self.health.set("connected", f"sending; {where} on another node")
        elif down is not None:
            self.health.set("reconnecting", _labelled(down, down.detail))
        elif all(s.state == "connected" for s in here):
            held = ", ".join(str(s.shard[0]) for s in here)
            others = len(here) < len(sessions)
            self.health.set("connected", f"shards {held} here; the others on other nodes" if others else "")

    # ---------------------------------------------------------------- inbound

    def _on_message(self, message: discord.Message, raw: dict[str, Any]) -> None:
        if self._stopping:
            return
        self._lanes.put(str(message.channel.id), (message, raw))

    def _on_interaction(self, interaction: discord.Interaction, raw: dict[str, Any]) -> None:
        if self._stopping:
            return
        if interaction.type is discord.InteractionType.component:
            task = asyncio.create_task(self._taps.handle(interaction, raw))
        elif interaction.type is discord.InteractionType.application_command:
            task = asyncio.create_task(self._commands.handle(interaction, raw))
        else:
            log.debug("ignored discord interaction of type %s", interaction.type)
            return
        self._interactions.add(task)
        task.add_done_callback(self._interactions.discard)

    async def _process(self, item: _Item) -> None:
        message, raw = item
        builder = self._builder
        if builder is None:
            return
        try:
            event = await builder.build(message, raw)
        except Exception:
            log.exception("skipped discord message %s: it could not be read", message.id)
            return
        if event is not None:
            await self._deliver(event)

    async def _deliver(self, event: InboundEvent) -> None:
        intake = self._intake
        assert intake is not None
        for attempt in range(1, self._intake_attempts + 1):
            try:
                await intake(event)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if attempt == self._intake_attempts:
                    log.error(
                        "discord message %s in %s dropped: intake failed %d times (last: %r)",
                        event.event_id,
                        event.thread_key,
                        attempt,
                        exc,
                    )
                    return
                delay = self._intake_retry.delay(attempt)
                log.warning(
                    "intake of discord message %s failed (%r); retrying in %.1f s",
                    event.event_id,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)

    # ---------------------------------------------------------------- outbound

    def render(self, markdown: str) -> list[RenderedChunk]:
        from connectors.render import render_markdown

        return render_markdown(markdown, "discord")

    async def send_prompt(self, thread: ThreadKey, prompt: Prompt) -> SendResult:
        """A message with buttons or a select menu (:mod:`connectors.interactive`)."""
        client = self._client
        if client is None:
            return SendResult.failed(ErrorClass.TRANSIENT, f"{self.name} is not running")
        return await buttons.send_prompt(client, thread, prompt)

    async def close_prompt(self, thread: ThreadKey, message_id: str, text: str) -> None:
        """The prompt's message shows its outcome, its components removed. Never raises."""
        if self._client is not None:
            await buttons.close_prompt(self._client, thread, message_id, text)

    async def send(self, item: OutboundChunk) -> SendResult:
        sender = self._sender
        if sender is None or self._stopping:
            return SendResult.failed(ErrorClass.TRANSIENT, f"discord channel {self.name} is not running")
        chat = item.thread.chat_id
        return await self.pacer.send(chat, lambda: sender.send(item), group=chat not in self._dm_chats)

    async def send_file(self, item: OutboundFile) -> SendResult:
        sender = self._sender
        if sender is None or self._stopping:
            return SendResult.failed(ErrorClass.TRANSIENT, f"discord channel {self.name} is not running")
        chat = item.thread.chat_id
        return await self.pacer.send(chat, lambda: sender.send_file(item), group=chat not in self._dm_chats)

    async def set_working(self, thread: ThreadKey, working: bool) -> None:
        typing = self._typing
        if typing is None or self._stopping:
            return
        try:
            typing.set(thread, working)
        except Exception:
            log.debug("typing indicator for %s not changed", thread, exc_info=True)


def _labelled(session: GatewaySession, detail: str) -> str:
    return f"{session.label}: {detail}" if session.label else detail
