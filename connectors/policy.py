"""Who may talk to a channel, and when the bot answers in groups.

Every connector asks :class:`ChannelPolicy` before any side effect (download, store,
reply); one implementation keeps the rules identical across platforms.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from connectors.base import ChatType

log = logging.getLogger("talon.policy")


@dataclass(frozen=True, slots=True)
class ChannelPolicy:
    channel: str
    allowed_users: frozenset[str] = frozenset()
    allowed_chats: frozenset[str] = frozenset()
    trigger_words: tuple[str, ...] = ()
    require_mention: bool = True
    allow_bots: bool = False

    @classmethod
    def build(
        cls,
        channel: str,
        *,
        allowed_users: Iterable[str | int] = (),
        allowed_chats: Iterable[str | int] = (),
        trigger_words: Iterable[str] = (),
        require_mention: bool = True,
        allow_bots: bool = False,
    ) -> ChannelPolicy:
        return cls(
            channel=channel,
            allowed_users=frozenset(str(u) for u in allowed_users),
            allowed_chats=frozenset(str(c) for c in allowed_chats),
            trigger_words=tuple(w.lower() for w in trigger_words if w),
            require_mention=require_mention,
            allow_bots=allow_bots,
        )

    @classmethod
    def from_settings(cls, settings: Any) -> ChannelPolicy:
        """From a chat channel's settings (TelegramChannel, SlackChannel, DiscordChannel)."""
        return cls.build(
            settings.name,
            allowed_users=settings.allowed_users,
            allowed_chats=settings.allowed_chats,
            trigger_words=settings.trigger_words,
            require_mention=settings.require_mention,
            allow_bots=settings.allow_bots,
        )

    def admits(self, sender_id: str, chat_id: str, *, is_bot: bool = False) -> bool:
        """True when this sender in this chat may reach the bot at all.

        A refusal is logged once here (the audit line); callers then drop the event
        without storing anything.
        """
        reason = None
        if is_bot and not self.allow_bots:
            reason = "sender is a bot"
        elif self.allowed_users and sender_id not in self.allowed_users:
            reason = "user not in allowed_users"
        elif self.allowed_chats and chat_id not in self.allowed_chats:
            reason = "chat not in allowed_chats"
        if reason is None:
            return True
        log.info(
            "refused inbound message",
            extra={"channel": self.channel, "sender": sender_id, "chat": chat_id, "why": reason},
        )
        return False

    def wants_reply(self, chat_type: ChatType, text: str, *, mentioned: bool, replied_to_bot: bool) -> bool:
        """In DMs always; in groups only when mentioned, replied to, or triggered."""
        if chat_type == "dm" or not self.require_mention:
            return True
        if mentioned or replied_to_bot:
            return True
        return self.triggered(text)

    def triggered(self, text: str) -> bool:
        lowered = text.lower()
        return any(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", lowered) for w in self.trigger_words)
