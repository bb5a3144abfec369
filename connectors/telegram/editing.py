"""Editing and deleting the bot's messages, and message drafts (``sendMessageDraft``), for
streamed replies.

Telegram answers an edit that changes nothing with "message is not modified": that is a
finished edit. A message that is gone or too old to edit is a permanent failure, so the
caller sends the reply fresh instead.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable

from telegram.constants import ParseMode
from telegram.error import BadRequest, TelegramError

from connectors.base import ChatType, ErrorClass, RenderedChunk, SendResult, ThreadKey
from connectors.streaming import NativeStream
from connectors.telegram.api import TelegramBot
from connectors.telegram.sending import chat_ref, classify, is_private_chat

log = logging.getLogger("talon.connectors.telegram")

PREVIEW_LIMIT = 4000  # characters, below the 4096 UTF-16 units of a message
_GROUP_INTERVAL = 3.0  # Telegram allows about 20 messages a minute into a group
_PRIVATE_INTERVAL = 1.0
_draft_ids = itertools.count(1)


def _unchanged(exc: BadRequest) -> bool:
    return "not modified" in str(exc).lower()


class TelegramEditor:
    """The :class:`connectors.streaming.MessageEditor` of a Telegram channel."""

    def __init__(self, bot: Callable[[], TelegramBot | None], *, native_drafts: bool = True) -> None:
        self._bot = bot
        self._native_drafts = native_drafts

    def min_interval(self, thread: ThreadKey) -> float:
        return _PRIVATE_INTERVAL if is_private_chat(thread.chat_id) else _GROUP_INTERVAL

    def preview_limit(self) -> int:
        return PREVIEW_LIMIT

    async def post(self, thread: ThreadKey, text: str, reply_to: str | None) -> SendResult:
        bot = self._bot()
        if bot is None:
            return SendResult.failed(ErrorClass.TRANSIENT, "the Telegram channel is not running")
        extra: dict[str, object] = {}
        if thread.topic:
            extra["message_thread_id"] = int(thread.topic)
        if reply_to and reply_to.isdigit() and not is_private_chat(thread.chat_id):
            extra["reply_to_message_id"] = int(reply_to)
            extra["allow_sending_without_reply"] = True
        try:
            message = await bot.send_message(chat_ref(thread.chat_id), text, **extra)  # type: ignore[arg-type]
        except TelegramError as exc:
            return classify(exc, bot.token)
        return SendResult.sent(str(message.message_id))

    async def edit(self, thread: ThreadKey, message_id: str, chunk: RenderedChunk) -> SendResult:
        bot = self._bot()
        if bot is None:
            return SendResult.failed(ErrorClass.TRANSIENT, "the Telegram channel is not running")
        chat, mid = chat_ref(thread.chat_id), int(message_id)
        try:
            if chunk.format == "html":
                try:
                    await bot.edit_message_text(chunk.text, chat, mid, parse_mode=ParseMode.HTML)
                except BadRequest as exc:
                    if "can't parse entities" not in str(exc).lower():
                        raise
                    await bot.edit_message_text(chunk.plain, chat, mid)
            else:
                await bot.edit_message_text(chunk.plain or chunk.text, chat, mid)
        except BadRequest as exc:
            if _unchanged(exc):
                return SendResult.sent(message_id)
            return SendResult.failed(ErrorClass.PERMANENT, f"edit refused by Telegram: {exc}")
        except TelegramError as exc:
            return classify(exc, bot.token)
        return SendResult.sent(message_id)

    async def delete(self, thread: ThreadKey, message_id: str) -> SendResult:
        bot = self._bot()
        if bot is None:
            return SendResult.failed(ErrorClass.TRANSIENT, "the Telegram channel is not running")
        try:
            await bot.delete_message(chat_ref(thread.chat_id), int(message_id))
        except BadRequest as exc:
            if "not found" in str(exc).lower():
                return SendResult.sent(message_id)
            return SendResult.failed(ErrorClass.PERMANENT, f"delete refused by Telegram: {exc}")
        except TelegramError as exc:
            return classify(exc, bot.token)
        return SendResult.sent(message_id)

    def native(self, thread: ThreadKey, chat_type: ChatType) -> NativeStream | None:
        """Message drafts exist in private chats only."""
        if not self._native_drafts or not is_private_chat(thread.chat_id):
            return None
        return TelegramDraft(self._bot, thread)


class TelegramDraft:
    """A reply streamed as a message draft: the user sees it grow; it vanishes when the reply
    is sent, so nothing is left to replace or delete after a crash."""

    message_id: str | None = None

    def __init__(self, bot: Callable[[], TelegramBot | None], thread: ThreadKey) -> None:
        self._bot = bot
        self._thread = thread
        self._draft_id = next(_draft_ids)

    async def update(self, text: str) -> SendResult:
        bot = self._bot()
        if bot is None:
            return SendResult.failed(ErrorClass.TRANSIENT, "the Telegram channel is not running")
        topic = int(self._thread.topic) if self._thread.topic else None
        try:
            await bot.send_message_draft(
                int(self._thread.chat_id), self._draft_id, text, message_thread_id=topic
            )
        except TelegramError as exc:
            return classify(exc, bot.token)
        return SendResult.sent(None)

    async def finish(self) -> SendResult:
        return SendResult.sent(None)
