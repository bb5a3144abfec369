"""Editing and deleting the bot's messages on Discord, for streamed replies (no native
streaming: previews are edited). Discord allows about five edits per five seconds per channel."""

from __future__ import annotations

from collections.abc import Callable

import aiohttp
import discord

from connectors.base import ChatType, ErrorClass, RenderedChunk, SendResult, ThreadKey
from connectors.discord_bot.outbound import classify_http_error
from connectors.streaming import NativeStream

PREVIEW_LIMIT = 1900  # characters, below Discord's 2,000
_INTERVAL = 1.0
_NONE = discord.AllowedMentions.none()


def _target(thread: ThreadKey) -> int:
    return int(thread.topic or thread.chat_id)


def _failed(exc: Exception) -> SendResult:
    if isinstance(exc, discord.HTTPException):
        return classify_http_error(exc)
    return SendResult.failed(ErrorClass.TRANSIENT, f"discord: {exc!r}")


class DiscordEditor:
    """The :class:`connectors.streaming.MessageEditor` of a Discord channel."""

    def __init__(self, client: Callable[[], discord.Client | None], dm_chats: set[str]) -> None:
        self._client = client
        self._dm_chats = dm_chats

    def min_interval(self, thread: ThreadKey) -> float:
        return _INTERVAL

    def preview_limit(self) -> int:
        return PREVIEW_LIMIT

    def _channel(self, thread: ThreadKey) -> discord.PartialMessageable | None:
        client = self._client()
        return client.get_partial_messageable(_target(thread)) if client is not None else None

    async def post(self, thread: ThreadKey, text: str, reply_to: str | None) -> SendResult:
        channel = self._channel(thread)
        if channel is None:
            return SendResult.failed(ErrorClass.TRANSIENT, "the Discord channel is not running")
        kwargs: dict[str, object] = {"allowed_mentions": _NONE}
        if reply_to and reply_to.isdigit() and thread.chat_id not in self._dm_chats:
            kwargs["reference"] = discord.MessageReference(
                message_id=int(reply_to), channel_id=_target(thread), fail_if_not_exists=False
            )
        try:
            message = await channel.send(discord.utils.escape_markdown(text), **kwargs)  # type: ignore[arg-type]
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            return _failed(exc)
        return SendResult.sent(str(message.id))

    async def edit(self, thread: ThreadKey, message_id: str, chunk: RenderedChunk) -> SendResult:
        channel = self._channel(thread)
        if channel is None:
            return SendResult.failed(ErrorClass.TRANSIENT, "the Discord channel is not running")
        text = chunk.text if chunk.format == "markdown" else discord.utils.escape_markdown(chunk.plain)
        try:
            await channel.get_partial_message(int(message_id)).edit(content=text, allowed_mentions=_NONE)
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            return _failed(exc)
        return SendResult.sent(message_id)

    async def delete(self, thread: ThreadKey, message_id: str) -> SendResult:
        channel = self._channel(thread)
        if channel is None:
            return SendResult.failed(ErrorClass.TRANSIENT, "the Discord channel is not running")
        try:
            await channel.get_partial_message(int(message_id)).delete()
        except discord.NotFound:
            return SendResult.sent(message_id)
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            return _failed(exc)
        return SendResult.sent(message_id)

    def native(self, thread: ThreadKey, chat_type: ChatType) -> NativeStream | None:
        return None  # Discord has no streaming API: previews are edited
