"""Slack ``message`` / ``app_mention`` events -> the pieces of an :class:`InboundEvent`.

Pure functions, no I/O: which events to skip, where a message lives (:class:`ThreadKey`),
whether it addresses the bot, and its text made readable (Slack's ``<@U…>``, ``<url|label>``
and ``&lt;`` markup undone).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

from connectors.base import ChatType, ThreadKey

# Subtypes that are someone saying something; all others (edits, deletes, joins, topic
# changes...) are housekeeping and skipped.
SPOKEN_SUBTYPES = frozenset({"file_share", "thread_broadcast", "me_message", "bot_message"})

_USER_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
_CHANNEL_REF = re.compile(r"<#([CG][A-Z0-9]+)(?:\|([^>]*))?>")
_SPECIAL = re.compile(r"<!(here|channel|everyone)(?:\|[^>]*)?>")
_SUBTEAM = re.compile(r"<!subteam\^[A-Z0-9]+(?:\|([^>]*))?>")
_LINK = re.compile(r"<((?:https?|mailto|tel):[^|>]+)(?:\|([^>]+))?>")
_COMMAND_SUFFIX = re.compile(r"^/([A-Za-z0-9_]+)@\S+")


class SkipEvent(Exception):
    """This event produces no :class:`InboundEvent`; ``malformed`` says whether it was broken
    (logged as a warning) or merely not for us (logged at debug level)."""

    def __init__(self, reason: str, *, malformed: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.malformed = malformed


@dataclass(frozen=True, slots=True)
class SlackMessage:
    """The parts of a Slack message event the connector needs.

    ``sender`` is the user id, or the ``bot_id`` for a bot without a user.
    """

    event_type: str
    channel: str
    ts: str
    thread_ts: str | None
    channel_type: str
    sender: str
    is_bot: bool
    text: str
    parent_user_id: str | None
    files: tuple[dict[str, Any], ...]

    @property
    def event_id(self) -> str:
        """Shared by the ``message`` and ``app_mention`` deliveries of one message and by
        Slack's retries: the pipeline keeps exactly one of them."""
        return f"{self.channel}:{self.ts}"

    @property
    def chat_type(self) -> ChatType:
        if self.channel_type == "im":
            return "dm"
        return "thread" if self.in_thread else "group"

    @property
    def in_thread(self) -> bool:
        return self.thread_ts is not None and self.thread_ts != self.ts

    def thread_key(self, channel_name: str) -> ThreadKey:
        """DMs are one thread; in channels a top-level message opens a thread under itself."""
        if self.channel_type == "im":
            return ThreadKey(channel_name, self.channel, None)
        return ThreadKey(channel_name, self.channel, self.thread_ts or self.ts)

    def mentions(self, bot_user_id: str) -> bool:
        if self.event_type == "app_mention":
            return True
        return any(m.group(1) == bot_user_id for m in _USER_MENTION.finditer(self.text))


def _str(event: dict[str, Any], key: str) -> str | None:
    value = event.get(key)
    return value if isinstance(value, str) and value else None


def _channel_type(event: dict[str, Any], channel: str) -> str:
    # app_mention events carry no channel_type; the id prefix tells DMs (D…) apart.
    declared = _str(event, "channel_type")
    if declared in ("im", "mpim", "channel", "group"):
        return declared
    return "im" if channel.startswith("D") else "channel"


def parse_message(event: Any, *, bot_user_id: str, bot_id: str | None) -> SlackMessage:
    """Validate a ``message`` or ``app_mention`` event; raise :class:`SkipEvent` for the
    bot's own messages, edits, deletes, housekeeping subtypes and malformed payloads."""
    if not isinstance(event, dict):
        raise SkipEvent("event is not an object", malformed=True)
    event_type = event.get("type")
    if event_type not in ("message", "app_mention"):
        raise SkipEvent(f"event type {event_type!r} is not a message")
    subtype = event.get("subtype")
    if subtype is not None and subtype not in SPOKEN_SUBTYPES:
        raise SkipEvent(f"message subtype {subtype!r}")
    if event.get("hidden"):
        raise SkipEvent("hidden message")
    channel, ts = _str(event, "channel"), _str(event, "ts")
    if channel is None or ts is None:
        raise SkipEvent("message without channel or ts", malformed=True)
    user, sender_bot = _str(event, "user"), _str(event, "bot_id")
    if (user is not None and user == bot_user_id) or (sender_bot is not None and sender_bot == bot_id):
        raise SkipEvent("the bot's own message")
    sender = user or sender_bot
    if sender is None:
        raise SkipEvent("message without user or bot_id", malformed=True)
    text = event.get("text") if isinstance(event.get("text"), str) else ""
    files = event.get("files")
    return SlackMessage(
        event_type=event_type,
        channel=channel,
        ts=ts,
        thread_ts=_str(event, "thread_ts"),
        channel_type=_channel_type(event, channel),
        sender=sender,
        is_bot=sender_bot is not None or subtype == "bot_message",
        text=text,
        parent_user_id=_str(event, "parent_user_id"),
        files=tuple(f for f in files if isinstance(f, dict)) if isinstance(files, list) else (),
    )


def sender_name_from_event(event: dict[str, Any]) -> str | None:
    """A display name carried by the event itself (``user_profile`` or ``bot_profile``)."""
    for key in ("user_profile", "bot_profile"):
        profile = event.get(key)
        if isinstance(profile, dict):
            for field in ("display_name", "real_name", "name"):
                if isinstance(profile.get(field), str) and profile[field]:
                    return profile[field]
    username = event.get("username")
    return username if isinstance(username, str) and username else None


def readable_text(text: str, *, bot_user_id: str, bot_name: str) -> str:
    """Slack markup -> plain text for the transcript.

    ``<@BOT> /stop@talon`` becomes ``/stop`` so the gateway sees the command; other mentions of
    the bot become ``@<bot_name>``; links become ``label (url)``; entities are unescaped.
    Mentions of other users stay as ``<@U…>`` so an answer can still address them.
    """
    text = text.strip()
    lead = re.match(rf"^<@{re.escape(bot_user_id)}(?:\|[^>]*)?>\s*", text)
    if lead and text[lead.end() :].startswith("/"):
        text = text[lead.end() :]
    text = _COMMAND_SUFFIX.sub(r"/\1", text)
    text = _USER_MENTION.sub(lambda m: f"@{bot_name}" if m.group(1) == bot_user_id else m.group(0), text)
    text = _CHANNEL_REF.sub(lambda m: f"#{m.group(2) or m.group(1)}", text)
    text = _SPECIAL.sub(lambda m: f"@{m.group(1)}", text)
    text = _SUBTEAM.sub(lambda m: m.group(1) or "@group", text)
    text = _LINK.sub(_link, text)
    return html.unescape(text) if "&" in text else text


def _link(m: re.Match[str]) -> str:
    url, label = m.group(1), m.group(2)
    if not label or label == url or url.endswith(label):
        return url.removeprefix("mailto:")
    return f"{label} ({url})"
