"""Telegram updates -> :class:`InboundEvent`, with the channel policy applied first."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from telegram import Message, MessageEntity, Update

from connectors.base import ChatType, InboundEvent, Sender, ThreadKey
from connectors.policy import ChannelPolicy
from connectors.telegram.api import TelegramBot
from connectors.telegram.files import AttachmentFetcher

log = logging.getLogger("talon.connectors.telegram")

_ADDRESSED_COMMAND = re.compile(r"^/([A-Za-z0-9_]{1,32})@([A-Za-z0-9_]+)(?![A-Za-z0-9_])")


@dataclass(frozen=True, slots=True)
class BotIdentity:
    id: int
    username: str


def chat_type_of(message: Message) -> ChatType:
    """private -> dm, channel -> channel, a forum-topic message -> thread, else group."""
    if message.chat.type == "private":
        return "dm"
    if message.chat.type == "channel":
        return "channel"
    if message.is_topic_message and message.message_thread_id:
        return "thread"
    return "group"


def thread_key_of(channel: str, message: Message) -> ThreadKey:
    """The chat, plus the forum topic when the message belongs to one.

    Outside forums ``message_thread_id`` marks reply chains, which are not threads here.
    """
    topic = message.message_thread_id if message.is_topic_message else None
    return ThreadKey(channel, str(message.chat.id), str(topic) if topic else None)


def sender_of(message: Message) -> Sender | None:
    """Who sent it: the user, or the chat for channel posts and anonymous admins."""
    if message.sender_chat is not None:
        chat = message.sender_chat
        return Sender(str(chat.id), chat.title or chat.username or str(chat.id), is_bot=False)
    user = message.from_user
    if user is None:
        return None
    return Sender(str(user.id), user.full_name or user.username or str(user.id), is_bot=user.is_bot)


def mentions_bot(message: Message, bot: BotIdentity) -> bool:
    """True for an ``@username`` mention of the bot or a text mention of its user id."""
    if message.text is not None:
        entities = message.parse_entities([MessageEntity.MENTION, MessageEntity.TEXT_MENTION])
    elif message.caption is not None:
        entities = message.parse_caption_entities([MessageEntity.MENTION, MessageEntity.TEXT_MENTION])
    else:
        return False
    for entity, value in entities.items():
        if entity.type == MessageEntity.MENTION and value[1:].lower() == bot.username.lower():
            return True
        if entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == bot.id:
            return True
    return False


def normalize_command(text: str, bot_username: str) -> tuple[str, bool]:
    """``/stop@thisbot now`` -> (``/stop now``, True); other text is returned unchanged.

    A command addressed to another bot stays as it is and does not address this one.
    """
    m = _ADDRESSED_COMMAND.match(text)
    if m and m.group(2).lower() == bot_username.lower():
        return f"/{m.group(1)}{text[m.end() :]}", True
    return text, False


def _replied_message(message: Message) -> Message | None:
    """The message this one answers; in a forum topic every message "replies" to the
    topic's opening service message, which is not a reply anyone wrote."""
    replied = message.reply_to_message
    if replied is None or (message.is_topic_message and replied.message_id == message.message_thread_id):
        return None
    return replied


class UpdateReader:
    """Turns one raw update into an event for the gateway, or ``None`` to skip it.

    The policy is asked before anything else happens: a refused sender's files are not
    downloaded and nothing of the message reaches the gateway.

    Args:
        channel: the channel (config) name.
        bot: the client, bound to the parsed objects.
        identity: the bot's own user id and username.
        policy: who may talk to the bot and when it answers in groups.
        files: downloads attachments of admitted messages.
    """

    def __init__(
        self,
        *,
        channel: str,
        bot: TelegramBot,
        identity: BotIdentity,
        policy: ChannelPolicy,
        files: AttachmentFetcher,
    ) -> None:
        self._channel = channel
        self._bot = bot
        self._me = identity
        self._policy = policy
        self._files = files

    async def read(self, raw: dict[str, Any]) -> InboundEvent | None:
        """Raises ``ValueError``/``TypeError``/``KeyError`` for a malformed update."""
        update_id = raw.get("update_id")
        if not isinstance(update_id, int):
            raise ValueError("update without an integer update_id")
        update = Update.de_json(raw, self._bot)
        message = update.message or update.channel_post
        if message is None:
            log.debug("ignoring update %s: no new message in it", update_id)
            return None
        if message.from_user is not None and message.from_user.id == self._me.id:
            return None
        sender = sender_of(message)
        if sender is None:
            log.debug("ignoring update %s: message without a sender", update_id)
            return None
        key = thread_key_of(self._channel, message)
        if not self._policy.admits(sender.id, key.chat_id, is_bot=sender.is_bot):
            return None
        chat_type = chat_type_of(message)
        text, addressed = normalize_command(message.text or message.caption or "", self._me.username)
        mentioned = addressed or mentions_bot(message, self._me)
        replied = _replied_message(message)
        replied_to_bot = bool(replied and replied.from_user and replied.from_user.id == self._me.id)
        needs_reply = self._policy.wants_reply(
            chat_type, text, mentioned=mentioned, replied_to_bot=replied_to_bot
        )
        attachments, notes = await self._files.fetch(message, key)
        if notes:
            text = "\n".join([text, *notes]) if text else "\n".join(notes)
        return InboundEvent(
            channel=self._channel,
            event_id=str(update_id),
            thread_key=key,
            chat_type=chat_type,
            sender=sender,
            text=text,
            mentions_bot=mentioned,
            needs_reply=needs_reply,
            reply_to=str(replied.message_id) if replied else None,
            attachments=tuple(attachments),
            platform_message_id=str(message.message_id),
            raw=raw,
            album=message.media_group_id,
        )
