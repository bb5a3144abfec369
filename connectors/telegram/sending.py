"""Delivering one rendered chunk and classifying what went wrong.

PTB's :class:`telegram.Bot` does not retry on its own, so every failure reaches the
outbox exactly once and the outbox decides: flood control becomes ``TRANSIENT`` with
Telegram's ``retry_after``, a timeout after the request left becomes ``AMBIGUOUS``.
"""

from __future__ import annotations

import datetime as dtm
import logging
import warnings

import httpx
from telegram import Message, ReplyParameters
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.warnings import PTBDeprecationWarning

from connectors.base import ErrorClass, OutboundChunk, SendResult
from connectors.telegram.api import TelegramBot, redact

log = logging.getLogger("talon.connectors.telegram")

# httpx failures that happen before any byte of the request reached the server.
_NOT_SENT = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.WriteError,
    httpx.UnsupportedProtocol,
)
# Failures after the request was sent: Telegram may have acted on it.
_MAYBE_SENT = (httpx.ReadError, httpx.ReadTimeout, httpx.RemoteProtocolError)


def chat_ref(chat_id: str) -> int | str:
    """Numeric chat ids as ints; ``@channelname`` stays a string."""
    try:
        return int(chat_id)
    except ValueError:
        return chat_id


def is_private_chat(chat_id: str) -> bool:
    """Private chats have positive ids; groups and channels negative ids or ``@names``."""
    return chat_id.isdigit()


async def send_chunk(bot: TelegramBot, item: OutboundChunk) -> SendResult:
    """Send ``item.chunk`` as HTML (plain-text fallback on an entity parse error).

    Replies quote ``item.reply_to`` in groups (a private chat needs no quote), and
    survive the quoted message being deleted; forum topics get ``message_thread_id``.
    """
    chat = chat_ref(item.thread.chat_id)
    extra: dict[str, object] = {}
    if item.reply_to and item.reply_to.isdigit() and not (isinstance(chat, int) and chat > 0):
        extra["reply_parameters"] = ReplyParameters(
            message_id=int(item.reply_to), allow_sending_without_reply=True
        )
    chunk = item.chunk
    try:
        if item.thread.topic:
            extra["message_thread_id"] = int(item.thread.topic)
        message = await _send(
            bot, chat, chunk.text, chunk.plain, chunk.format == "html", item.delivery_id, extra
        )
    except TelegramError as exc:  # anything else is a bug, which the outbox retries
        result = classify(exc, bot.token)
        log.info(
            "send failed (%s): %s",
            result.error_class,
            result.error,
            extra={"delivery_id": item.delivery_id, "chat": str(item.thread)},
        )
        return result
    return SendResult.sent(str(message.message_id))


async def _send(
    bot: TelegramBot,
    chat: int | str,
    text: str,
    plain: str,
    html: bool,
    delivery_id: int,
    extra: dict[str, object],
) -> Message:
    if not html:
        return await bot.send_message(chat, plain, **extra)  # type: ignore[arg-type]
    try:
        return await bot.send_message(chat, text, parse_mode=ParseMode.HTML, **extra)  # type: ignore[arg-type]
    except BadRequest as exc:
        if "can't parse entities" not in str(exc).lower():
            raise
        log.warning(
            "Telegram rejected the HTML of delivery %s (%s); sending it as plain text", delivery_id, exc
        )
    return await bot.send_message(chat, plain, **extra)  # type: ignore[arg-type]


def classify(exc: BaseException, token: str = "") -> SendResult:
    """Map a send failure to what the outbox must do about it."""
    message = redact(str(exc), token) or type(exc).__name__
    if isinstance(exc, RetryAfter):
        return SendResult.failed(
            ErrorClass.TRANSIENT, f"flood control: {message}", retry_after=retry_after_seconds(exc)
        )
    if isinstance(exc, TimedOut):
        if isinstance(exc.__cause__, _NOT_SENT):
            return SendResult.failed(ErrorClass.TRANSIENT, f"not sent: {message}")
        return SendResult.failed(
            ErrorClass.AMBIGUOUS, "timed out waiting for Telegram; the message may have been delivered"
        )
    if isinstance(exc, BadRequest):
        return SendResult.failed(ErrorClass.PERMANENT, f"rejected by Telegram: {message}")
    if isinstance(exc, Forbidden):
        return SendResult.failed(ErrorClass.PERMANENT, f"not allowed to post here: {message}")
    if isinstance(exc, InvalidToken):
        return SendResult.failed(ErrorClass.PERMANENT, "Telegram rejected the bot token")
    if isinstance(exc, ChatMigrated):
        return SendResult.failed(
            ErrorClass.PERMANENT, f"the group became a supergroup; its new chat id is {exc.new_chat_id}"
        )
    if isinstance(exc, NetworkError):
        if isinstance(exc.__cause__, _MAYBE_SENT):
            return SendResult.failed(ErrorClass.AMBIGUOUS, f"connection lost after sending: {message}")
        return SendResult.failed(ErrorClass.TRANSIENT, f"network error: {message}")
    if isinstance(exc, TelegramError):
        # e.g. an unreadable 2xx answer: the request arrived, its outcome is unknown.
        return SendResult.failed(ErrorClass.AMBIGUOUS, f"unexpected answer from Telegram: {message}")
    return SendResult.failed(ErrorClass.PERMANENT, f"{type(exc).__name__}: {message}")


def retry_after_seconds(exc: RetryAfter) -> float:
    """``RetryAfter.retry_after`` as seconds, whichever type this PTB version returns."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)
