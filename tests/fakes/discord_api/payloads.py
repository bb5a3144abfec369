"""Discord object payloads (users, guilds, channels, messages) as the real API shapes them."""

from __future__ import annotations

import itertools
import time
from typing import Any

DISCORD_EPOCH_MS = 1_420_070_400_000

TEXT_CHANNEL = 0
DM_CHANNEL = 1
PUBLIC_THREAD = 11

_counter = itertools.count(1)


def snowflake() -> str:
    """A fresh, increasing snowflake id (timestamp in the high bits, like Discord's)."""
    stamp = int(time.time() * 1000) - DISCORD_EPOCH_MS
    return str((stamp << 22) | (next(_counter) & 0x3FFFFF))


def iso_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000+00:00", time.gmtime())


def user(user_id: str, username: str, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": user_id,
        "username": username,
        "global_name": username.title(),
        "discriminator": "0",
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
    }


def member(*, roles: list[str] | None = None) -> dict[str, Any]:
    return {
        "roles": roles or [],
        "joined_at": iso_now(),
        "deaf": False,
        "mute": False,
        "nick": None,
        "flags": 0,
        "pending": False,
    }


def text_channel(channel_id: str, guild_id: str, name: str) -> dict[str, Any]:
    return {
        "id": channel_id,
        "type": TEXT_CHANNEL,
        "guild_id": guild_id,
        "name": name,
        "position": 0,
        "permission_overwrites": [],
        "nsfw": False,
        "parent_id": None,
        "topic": None,
        "last_message_id": None,
        "rate_limit_per_user": 0,
    }


def thread_channel(thread_id: str, guild_id: str, parent_id: str, owner_id: str, name: str) -> dict[str, Any]:
    return {
        "id": thread_id,
        "type": PUBLIC_THREAD,
        "guild_id": guild_id,
        "parent_id": parent_id,
        "owner_id": owner_id,
        "name": name,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "message_count": 0,
        "member_count": 1,
        "total_message_sent": 0,
        "flags": 0,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": iso_now(),
            "locked": False,
            "invitable": True,
            "create_timestamp": iso_now(),
        },
    }


def dm_channel(channel_id: str, recipient: dict[str, Any]) -> dict[str, Any]:
    return {"id": channel_id, "type": DM_CHANNEL, "last_message_id": None, "recipients": [recipient]}


def guild(
    guild_id: str,
    *,
    owner_id: str,
    channels: list[dict[str, Any]],
    threads: list[dict[str, Any]],
    bot_user: dict[str, Any],
) -> dict[str, Any]:
    everyone = {
        "id": guild_id,
        "name": "@everyone",
        "color": 0,
        "hoist": False,
        "position": 0,
        "permissions": "1071698660929",
        "managed": False,
        "mentionable": False,
        "flags": 0,
    }
    bot_member = {**member(), "user": bot_user}
    return {
        "id": guild_id,
        "name": "Test Guild",
        "icon": None,
        "owner_id": owner_id,
        "unavailable": False,
        "large": False,
        "member_count": 2,
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "afk_timeout": 300,
        "mfa_level": 0,
        "nsfw_level": 0,
        "premium_tier": 0,
        "preferred_locale": "en-US",
        "system_channel_flags": 0,
        "features": [],
        "roles": [everyone],
        "emojis": [],
        "stickers": [],
        "channels": [{k: v for k, v in c.items() if k != "guild_id"} for c in channels],
        "threads": threads,
        "members": [bot_member],
        "voice_states": [],
        "presences": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "soundboard_sounds": [],
        "joined_at": iso_now(),
    }


def application(app_id: str, owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": app_id,
        "name": "Talon Test",
        "description": "",
        "icon": None,
        "bot_public": False,
        "bot_require_code_grant": False,
        "owner": owner,
        "verify_key": "0" * 64,
        "flags": 0,
        "team": None,
    }


def message(
    *,
    message_id: str,
    channel_id: str,
    author: dict[str, Any],
    content: str,
    guild_id: str | None = None,
    mentions: list[dict[str, Any]] | None = None,
    attachments: list[dict[str, Any]] | None = None,
    referenced: dict[str, Any] | None = None,
    nonce: str | None = None,
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "id": message_id,
        "channel_id": channel_id,
        "author": author,
        "content": content,
        "timestamp": iso_now(),
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": mentions or [],
        "mention_roles": [],
        "attachments": attachments or [],
        "embeds": [],
        "components": [],
        "pinned": False,
        "type": 19 if referenced else 0,
        "flags": 0,
    }
    if guild_id is not None:
        payload["guild_id"] = guild_id
        if not author.get("bot"):
            payload["member"] = member()
    if referenced is not None:
        payload["message_reference"] = {
            "type": 0,
            "message_id": referenced["id"],
            "channel_id": referenced["channel_id"],
            **({"guild_id": guild_id} if guild_id else {}),
        }
        payload["referenced_message"] = referenced
    if nonce is not None:
        payload["nonce"] = nonce
    return payload


def attachment(
    attachment_id: str, filename: str, size: int, url: str, content_type: str | None
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": attachment_id,
        "filename": filename,
        "size": size,
        "url": url,
        "proxy_url": url,
    }
    if content_type:
        data["content_type"] = content_type
    return data
