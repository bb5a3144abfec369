"""Discord message -> :class:`InboundEvent`: where it lives, who sent it, what it says.

Thread keys: a message in a guild text channel or a DM is keyed by its channel id; a message
in a thread is keyed by ``chat_id`` = the thread's parent channel and ``topic`` = the
thread. So ``allowed_chats`` and bindings that name a channel also cover its threads, and
every thread is still its own conversation.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import discord

from connectors.base import Attachment, ChatType, InboundEvent, Sender, ThreadKey
from connectors.policy import ChannelPolicy
from gateway.command_table import CHAT_COMMANDS

log = logging.getLogger("talon.connectors.discord")

_CONVERSATION_TYPES = (discord.MessageType.default, discord.MessageType.reply)
_GATEWAY_COMMANDS = (*(c.name for c in CHAT_COMMANDS), "start")
_DOWNLOAD_TIMEOUT = 120.0


@dataclass(frozen=True, slots=True)
class Origin:
    chat_id: str
    topic: str | None
    chat_type: ChatType


class RecentIds:
    """A bounded set of ids (the bot's recently sent message ids)."""

    def __init__(self, limit: int = 4096) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._limit = limit

    def add(self, item: str) -> None:
        self._ids[item] = None
        self._ids.move_to_end(item)
        while len(self._ids) > self._limit:
            self._ids.popitem(last=False)

    def __contains__(self, item: object) -> bool:
        return item in self._ids


def human_size(n: int) -> str:
    """Bytes in decimal units: ``30000000`` -> ``"30 MB"``, ``1500`` -> ``"1.5 KB"``."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{n} B"


def safe_filename(name: str) -> str:
    cleaned = re.sub(r"[^\w.\- ]", "_", name).strip(" .")
    return cleaned[:120] or "file"


def normalize_text(
    content: str, *, bot_id: int | None, bot_name: str, mentions: list[discord.abc.User]
) -> str:
    """Readable text: a leading bot mention dropped, other user mentions as ``@name``,
    ``/stop@botname`` as ``/stop``."""
    text = content
    if bot_id is not None:
        text = re.sub(rf"^\s*(?:<@!?{bot_id}>\s*)+", "", text)
        text = re.sub(rf"<@!?{bot_id}>", f"@{bot_name}", text)
    for user in mentions:
        text = re.sub(rf"<@!?{user.id}>", f"@{user.display_name}", text)
    text = text.strip()
    command = re.match(r"^/(\w+)@(\S+)", text)
    if command and (command[1].lower() in _GATEWAY_COMMANDS or command[2].lower() == bot_name.lower()):
        text = f"/{command[1]}" + text[command.end() :]
    return text


class InboundBuilder:
    """Turns messages into events, asking the policy before any side effect.

    Args:
        channel: the Talon channel name.
        client: the logged-in client (its user is the bot).
        policy: who may reach the bot, and when it answers.
        files_dir: attachments go to ``files_dir/<channel>/<chat_id>[/<topic>]/``.
        max_attachment_bytes: larger attachments are skipped and noted in the text.
        sent_ids: the bot's recent message ids (a reply to one of them addresses the bot).
    """

    def __init__(
        self,
        *,
        channel: str,
        client: discord.Client,
        policy: ChannelPolicy,
        files_dir: Path,
        max_attachment_bytes: int,
        sent_ids: RecentIds,
    ) -> None:
        self._channel = channel
        self._client = client
        self._policy = policy
        self._files_dir = files_dir
        self._max_bytes = max_attachment_bytes
        self._sent_ids = sent_ids
        self._thread_parents: dict[int, int | None] = {}
        self.dm_chats: set[str] = set()

    async def build(self, message: discord.Message, raw: dict[str, Any]) -> InboundEvent | None:
        """The event for ``message``, or ``None`` when it is ignored or refused."""
        me = self._client.user
        if me is not None and message.author.id == me.id:
            return None
        if message.type not in _CONVERSATION_TYPES:
            log.debug("ignored discord message %s of type %s", message.id, message.type)
            return None
        origin = await self.origin(message, raw)
        author = message.author
        sender = Sender(id=str(author.id), display_name=author.display_name, is_bot=bool(author.bot))
        if not self._policy.admits(sender.id, origin.chat_id, is_bot=sender.is_bot):
            return None
        if origin.chat_type == "dm":
            self.dm_chats.add(origin.chat_id)

        mentioned = me is not None and any(user.id == me.id for user in message.mentions)
        reply_to, replied_to_bot = self._reply_info(message)
        text = normalize_text(
            message.content,
            bot_id=me.id if me else None,
            bot_name=me.name if me else "",
            mentions=[u for u in message.mentions if me is None or u.id != me.id],
        )
        attachments, notes = await self._download(message, origin)
        if notes:
            text = "\n".join([text, *notes]).strip()
        event = InboundEvent(
            channel=self._channel,
            event_id=str(message.id),
            thread_key=ThreadKey(self._channel, origin.chat_id, origin.topic),
            chat_type=origin.chat_type,
            sender=sender,
            text=text,
            mentions_bot=mentioned,
            reply_to=reply_to,
            attachments=tuple(attachments),
            platform_message_id=str(message.id),
            raw=raw,
        )
        event.needs_reply = self._policy.wants_reply(
            origin.chat_type, text, mentioned=mentioned, replied_to_bot=replied_to_bot
        )
        return event

    async def origin(self, message: discord.Message, raw: dict[str, Any]) -> Origin:
        channel = message.channel
        guild_id = raw.get("guild_id") or (message.guild.id if message.guild else None)
        if guild_id is None:
            guild_id = getattr(channel, "guild_id", None)
        if guild_id is None:
            return Origin(str(channel.id), None, "dm")
        if isinstance(channel, discord.Thread):
            return Origin(str(channel.parent_id), str(channel.id), "thread")
        if isinstance(channel, discord.PartialMessageable):
            parent = await self._thread_parent(channel.id)
            if parent is not None:
                return Origin(str(parent), str(channel.id), "thread")
        return Origin(str(channel.id), None, "group")

    async def _thread_parent(self, channel_id: int) -> int | None:
        """The parent of an uncached thread (``None`` for a plain channel), asked once."""
        if channel_id in self._thread_parents:
            return self._thread_parents[channel_id]
        try:
            fetched = await self._client.fetch_channel(channel_id)
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            # not cached: keyed by its own id this time, asked again next time
            log.warning("could not look up discord channel %s: %s", channel_id, exc)
            return None
        parent = fetched.parent_id if isinstance(fetched, discord.Thread) else None
        self._thread_parents[channel_id] = parent
        return parent

    def _reply_info(self, message: discord.Message) -> tuple[str | None, bool]:
        ref = message.reference
        if ref is None or ref.message_id is None or ref.type is not discord.MessageReferenceType.reply:
            return None, False
        me = self._client.user
        resolved = ref.resolved
        if isinstance(resolved, discord.Message) and me is not None:
            return str(ref.message_id), resolved.author.id == me.id
        return str(ref.message_id), str(ref.message_id) in self._sent_ids

    async def _download(self, message: discord.Message, origin: Origin) -> tuple[list[Attachment], list[str]]:
        saved: list[Attachment] = []
        notes: list[str] = []
        if not message.attachments:
            return saved, notes
        folder = self._files_dir / self._channel / origin.chat_id
        if origin.topic:
            folder = folder / origin.topic
        limit = self._max_bytes
        for index, item in enumerate(message.attachments):
            name = item.filename
            if item.size > limit:
                notes.append(self._skipped(name, item.size, limit))
                continue
            try:
                async with asyncio.timeout(_DOWNLOAD_TIMEOUT):
                    data = await item.read()
            except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
                log.warning("discord attachment %s of message %s not downloaded: %s", name, message.id, exc)
                notes.append(f"[attachment {name} could not be downloaded]")
                continue
            if len(data) > limit:  # the declared size was wrong
                notes.append(self._skipped(name, len(data), limit))
                continue
            path = folder / f"{message.id}-{index}-{safe_filename(name)}"
            try:
                await asyncio.to_thread(_write, path, data)
            except OSError as exc:
                log.error("discord attachment %s not saved to %s: %s", name, path, exc)
                notes.append(f"[attachment {name} could not be saved]")
                continue
            saved.append(Attachment(name=name, path=str(path), mime_type=item.content_type, size=len(data)))
        return saved, notes

    @staticmethod
    def _skipped(name: str, size: int, limit: int) -> str:
        return f"[attachment {name} skipped: {human_size(size)} over the {human_size(limit)} limit]"


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
