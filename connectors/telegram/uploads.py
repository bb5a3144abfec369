"""Uploading one file: ``sendPhoto`` for a picture within the photo limit, ``sendVoice`` for
OGG/Opus audio (a spoken reply plays as a voice message), else ``sendDocument``.

The bytes go to PTB as ``bytes`` (a multipart upload), never as a path or string, which
PTB would take for a file id or URL. Failures are classified like text sends
(:func:`connectors.telegram.sending.classify`); a photo Telegram refuses to process (its
dimensions, its format) is sent again as a document, since a refusal posted nothing.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from telegram import Message, ReplyParameters
from telegram.error import BadRequest, TelegramError

from connectors.base import OutboundFile, SendResult
from connectors.telegram.api import TelegramBot
from connectors.telegram.sending import chat_ref, classify
from gateway.voice.ogg import is_ogg_opus

log = logging.getLogger("talon.connectors.telegram")

# What sendPhoto takes; anything else (gif, svg, heic) goes as a document.
PHOTO_TYPES = frozenset({"image/jpeg", "image/png", "image/webp"})


async def send_file(bot: TelegramBot, item: OutboundFile, *, max_photo_bytes: int) -> SendResult:
    """Upload ``item`` into its chat (and forum topic), quoting ``reply_to`` in groups."""
    chat = chat_ref(item.thread.chat_id)
    extra: dict[str, object] = {"filename": item.name}
    if item.reply_to and item.reply_to.isdigit() and not (isinstance(chat, int) and chat > 0):
        extra["reply_parameters"] = ReplyParameters(
            message_id=int(item.reply_to), allow_sending_without_reply=True
        )
    try:
        if item.thread.topic:
            extra["message_thread_id"] = int(item.thread.topic)
        data = await asyncio.to_thread(Path(item.path).read_bytes)
        as_photo = item.mime_type in PHOTO_TYPES and len(data) <= max_photo_bytes
        if is_ogg_opus(data):
            message = await bot.send_voice(chat, data, **extra)  # type: ignore[arg-type]
        else:
            message = await _upload(bot, chat, data, as_photo, item.delivery_id, extra)
    except TelegramError as exc:
        result = classify(exc, bot.token)
        log.info(
            "file upload failed (%s): %s",
            result.error_class,
            result.error,
            extra={"delivery_id": item.delivery_id, "chat": str(item.thread)},
        )
        return result
    return SendResult.sent(str(message.message_id))


async def _upload(
    bot: TelegramBot, chat: int | str, data: bytes, as_photo: bool, delivery_id: int, extra: dict[str, object]
) -> Message:
    if as_photo:
        try:
            return await bot.send_photo(chat, data, **extra)  # type: ignore[arg-type]
        except BadRequest as exc:
            log.warning(
                "Telegram refused delivery %s as a photo (%s); sending it as a document", delivery_id, exc
            )
    return await bot.send_document(chat, data, **extra)  # type: ignore[arg-type]
