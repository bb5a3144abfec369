"""The Telegram channel: python-telegram-bot against the Bot API.

Updates arrive by long polling (default) or by webhook when ``webhook_url`` is set. Each
one is checked against the channel policy, turned into an :class:`InboundEvent` and
handed to the gateway's intake; Telegram is acknowledged only after intake returns.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from telegram.constants import ChatAction
from telegram.error import BadRequest, InvalidToken, NetworkError, RetryAfter, TelegramError

from connectors.base import (
    ConnectorHealth,
    ConnectorStartError,
    ErrorClass,
    IntakeHandler,
    OutboundChunk,
    OutboundFile,
    ReceiveGates,
    RenderedChunk,
    SendResult,
    ThreadKey,
)
from connectors.interactive import Prompt
from connectors.pacing import PacingPolicy, SendPacer
from connectors.policy import ChannelPolicy
from connectors.render import render_markdown
from connectors.telegram import buttons
from connectors.telegram.api import (
    ALLOWED_UPDATES,
    TelegramBot,
    TelegramTuning,
    api_root,
    hide_token_in_logs,
    make_bot,
    redact,
    shared_tls_context,
)
from connectors.telegram.commands import register_commands
from connectors.telegram.editing import TelegramEditor
from connectors.telegram.files import AttachmentFetcher
from connectors.telegram.inbound import BotIdentity, UpdateReader
from connectors.telegram.polling import Poller
from connectors.telegram.sending import chat_ref, is_private_chat, send_chunk
from connectors.telegram.uploads import send_file
from connectors.telegram.webhook import WebhookServer, secret_problem
from connectors.telegram.working import TypingIndicators
from gateway.config import TelegramChannel

log = logging.getLogger("talon.connectors.telegram")


class TelegramConnector:
    """One Telegram bot account, configured as a channel.

    Args:
        settings: the channel's settings from talon.yaml.
        files_dir: where inbound attachments are stored (under ``<channel>/<chat>/``).
        tuning: timings (backoff, typing delays, HTTP timeouts); defaults suit production. The
            typing interval is the channel's ``typing_interval`` (Telegram shows one action for ~5 s).
    """

    idempotent_send = False

    def __init__(
        self, settings: TelegramChannel, *, files_dir: Path, tuning: TelegramTuning | None = None
    ) -> None:
        self.name = settings.name
        self.health = ConnectorHealth()
        self.max_file_bytes = settings.max_upload_bytes
        hide_token_in_logs(settings.token)
        self._settings = settings
        self._files_dir = files_dir
        self._tuning = tuning or TelegramTuning()
        self._policy = ChannelPolicy.from_settings(settings)
        self._bot: TelegramBot | None = None
        self._intake: IntakeHandler | None = None
        self._reader: UpdateReader | None = None
        self._poller: Poller | None = None
        self._waiting_to_poll: asyncio.Task[None] | None = None
        self.receive_gates: ReceiveGates | None = None  # set by a cluster node (connectors/base.py)
        self._webhook: WebhookServer | None = None
        self.pacer = SendPacer(PacingPolicy.from_settings(settings.pacing))  # shared out in a cluster
        self.message_editor = TelegramEditor(lambda: self._bot)  # streamed replies (connectors/streaming.py)
        self._typing = TypingIndicators(
            self._send_typing,
            interval=settings.typing_interval,
            max_seconds=self._tuning.typing_max,
            delay=self._tuning.typing_delay,
        )

    @property
    def single_receiver(self) -> bool:
        """Long polling has room for one ``getUpdates`` caller per bot; a webhook for every node."""
        return not self._settings.webhook_url

    @property
    def bot_username(self) -> str | None:
        """The bot's @username (without @) once started."""
        return self._bot.bot.username if self._bot is not None else None

    async def start(self, intake: IntakeHandler) -> None:
        """Check the token with ``getMe``, then receive updates in the background.

        Raises:
            ConnectorStartError: bad token, unreachable API, webhook without a secret or
                a webhook address that cannot be bound.
        """
        if self._bot is not None:
            return
        try:
            await self._start(intake)
        except ConnectorStartError as exc:
            self.health.set("failed", str(exc))
            raise

    async def _start(self, intake: IntakeHandler) -> None:
        settings = self._settings
        if settings.webhook_url:
            problem = secret_problem(settings.webhook_secret)
            if problem:
                raise ConnectorStartError(
                    f"{self.name}: {problem}; set webhook_secret so the webhook can tell Telegram's requests "
                    "from anyone else's (or remove webhook_url to use long polling)"
                )
        tls = await asyncio.to_thread(shared_tls_context)
        bot = make_bot(settings, self._tuning, tls)
        try:
            await bot.initialize()
        except InvalidToken:
            await bot.close()
            raise ConnectorStartError(
                f"{self.name}: Telegram rejected the bot token (401 Unauthorized); set the channel's token "
                "(TELEGRAM_BOT_TOKEN) to the token @BotFather gave you"
            ) from None
        except TelegramError as exc:
            await bot.close()
            raise ConnectorStartError(
                f"{self.name}: cannot reach the Telegram Bot API at {api_root(settings)} "
                f"({redact(str(exc), settings.token)}); check the network and api_base_url",
                transient=_may_pass(exc),
            ) from None
        me = bot.bot
        identity = BotIdentity(me.id, me.username or "")
        self._bot = bot
        self._intake = intake
        self._reader = UpdateReader(
            channel=self.name,
            bot=bot,
            identity=identity,
            policy=self._policy,
            files=AttachmentFetcher(bot, self._files_dir, settings.max_attachment_bytes),
        )
        try:
            if settings.webhook_url:
                await self._start_webhook(bot, settings.webhook_url, settings.webhook_secret or "")
            else:
                await self._start_polling(bot, tls)
        except BaseException:
            await self.stop()
            raise
        await register_commands(bot, self.name)
        self.health.set("connected")
        log.info("%s: connected as @%s", self.name, identity.username)

    async def _start_polling(self, bot: TelegramBot, tls: ssl.SSLContext) -> None:
        try:
            await bot.delete_webhook()
        except TelegramError as exc:
            # The poller reports a lingering webhook as a conflict and removes it then.
            log.warning(
                "%s: could not remove a webhook before polling: %s", self.name, redact(str(exc), bot.token)
            )
        poller = Poller(
            name=self.name,
            make_bot=lambda: make_bot(self._settings, self._tuning, tls),
            handle=self._handle_update,
            health=self.health,
            poll_timeout=self._settings.poll_timeout,
            watchdog_seconds=self._settings.watchdog_seconds,
            tuning=self._tuning,
        )
        self._poller = poller
        gate = self.receive_gates("") if self.receive_gates is not None else None
        if gate is None:
            poller.start()
            return

        async def poll_when_ours() -> None:
            # Sending works meanwhile: only receiving waits for this node's turn.
            await gate.wait()
            poller.start()

        self._waiting_to_poll = asyncio.create_task(poll_when_ours(), name=f"{self.name}-wait-to-poll")

    async def _start_webhook(self, bot: TelegramBot, url: str, secret: str) -> None:
        settings = self._settings
        server = WebhookServer(
            name=self.name,
            host=settings.webhook_listen,
            port=settings.webhook_port,
            path=urlsplit(url).path or "/",
            secret=secret,
            handle=self._handle_update,
        )
        try:
            await server.start()
        except OSError as exc:
            raise ConnectorStartError(
                f"{self.name}: cannot listen for the webhook on {settings.webhook_listen}:{settings.webhook_port} "
                f"({exc.strerror or exc}); choose a free webhook_port"
            ) from None
        self._webhook = server
        try:
            await bot.set_webhook(url, secret_token=secret, allowed_updates=list(ALLOWED_UPDATES))
        except TelegramError as exc:
            raise ConnectorStartError(
                f"{self.name}: Telegram refused the webhook {url} ({redact(str(exc), bot.token)}); "
                "check webhook_url (Telegram needs a public HTTPS address)"
            ) from None

    async def _handle_update(self, raw: dict[str, Any]) -> None:
        """One update: skip it when malformed or refused, else commit it through intake.

        Raises whatever intake raised, so the update is not acknowledged.
        """
        assert self._reader is not None and self._intake is not None
        if "callback_query" in raw:
            await self._handle_tap(raw)
            return
        try:
            event = await self._reader.read(raw)
        except Exception as exc:
            log.warning(
                "%s: skipping malformed update %s: %s: %s",
                self.name,
                raw.get("update_id"),
                type(exc).__name__,
                exc,
            )
            return
        if event is not None:
            await self._intake(event)

    async def _handle_tap(self, raw: dict[str, Any]) -> None:
        """A button tap: committed through intake, then answered (its toast says what happened)."""
        bot, intake = self._bot, self._intake
        assert bot is not None and intake is not None
        try:
            event = buttons.read_tap(self.name, bot, raw, self._policy)
        except Exception as exc:
            log.warning("%s: skipping malformed callback query: %s: %s", self.name, type(exc).__name__, exc)
            return
        if event is None:
            await buttons.answer_tap(bot, raw, None)
            return
        result = await intake(event)
        await buttons.answer_tap(bot, raw, result.reply)

    async def send_prompt(self, thread: ThreadKey, prompt: Prompt) -> SendResult:
        """A message with an inline keyboard (:mod:`connectors.interactive`)."""
        bot = self._bot
        if bot is None:
            return SendResult.failed(ErrorClass.TRANSIENT, f"{self.name} is not running")
        chat = thread.chat_id
        send = partial(buttons.send_prompt, bot, thread, prompt)
        return await self.pacer.send(chat, send, group=not is_private_chat(chat))

    async def close_prompt(self, thread: ThreadKey, message_id: str, text: str) -> None:
        """The prompt's text with its outcome, the keyboard removed. Never raises."""
        if self._bot is not None:
            await buttons.close_prompt(self._bot, thread, message_id, text)

    async def show_selection(self, thread: ThreadKey, message_id: str, prompt: Prompt) -> None:
        """A multi-choice prompt's toggles redrawn with the selection ticked. Never raises."""
        if self._bot is not None:
            await buttons.show_selection(self._bot, thread, message_id, prompt)

    async def stop(self) -> None:
        """Stop receiving, end typing indicators and close HTTP sessions. Idempotent."""
        await self._typing.stop_all()
        waiting, self._waiting_to_poll = self._waiting_to_poll, None
        if waiting is not None:
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
        poller, self._poller = self._poller, None
        if poller is not None:
            await poller.stop()
        webhook, self._webhook = self._webhook, None
        if webhook is not None:
            await webhook.stop()
        bot, self._bot = self._bot, None
        if bot is not None:
            await bot.close()
        self.health.set("stopped")

    def render(self, markdown: str) -> list[RenderedChunk]:
        """Markdown -> Telegram HTML chunks within 4096 UTF-16 units, each with a plain twin."""
        return render_markdown(markdown, "telegram")

    async def send(self, item: OutboundChunk) -> SendResult:
        """Deliver one chunk; failures come back classified, never raised."""
        bot = self._bot
        if bot is None:
            return SendResult.failed(ErrorClass.TRANSIENT, f"{self.name} is not running")
        chat = item.thread.chat_id
        return await self.pacer.send(chat, lambda: send_chunk(bot, item), group=not is_private_chat(chat))

    async def send_file(self, item: OutboundFile) -> SendResult:
        """Upload one file (a photo or a document), paced like messages; failures come back classified."""
        bot = self._bot
        if bot is None:
            return SendResult.failed(ErrorClass.TRANSIENT, f"{self.name} is not running")
        chat = item.thread.chat_id
        upload = partial(send_file, bot, item, max_photo_bytes=self._settings.max_photo_bytes)
        return await self.pacer.send(chat, upload, group=not is_private_chat(chat))

    async def set_working(self, thread: ThreadKey, working: bool) -> None:
        """Show ``typing…`` in ``thread`` (refreshed until ``working=False``). Never raises."""
        if self._bot is None and working:
            return
        try:
            self._typing.set(thread, working)
        except Exception:
            log.debug("%s: could not change the typing indicator for %s", self.name, thread, exc_info=True)

    async def _send_typing(self, thread: ThreadKey) -> None:
        bot = self._bot
        if bot is None:
            return
        topic = int(thread.topic) if thread.topic and thread.topic.isdigit() else None
        await bot.send_chat_action(chat_ref(thread.chat_id), ChatAction.TYPING, message_thread_id=topic)


def _may_pass(exc: TelegramError) -> bool:
    """True for a failure a later try may not meet: no network, a timeout, a 5xx, flood
    control. A refusal (403, 400) stays until the configuration changes."""
    return isinstance(exc, RetryAfter) or (isinstance(exc, NetworkError) and not isinstance(exc, BadRequest))
