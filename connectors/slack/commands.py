"""Slack slash commands (``/stop``, ``/new``, ``/usage``, ``/help``) -> chat commands.

A slash command payload carries ``command``, ``text``, ``channel_id``, ``user_id``,
``user_name`` and ``trigger_id``, but never the thread it was typed under: Slack offers
slash commands only in a channel's or DM's message box. So a command steers:

- in a DM, the DM (one conversation, as for messages);
- in a channel, the thread where that user last addressed the bot, else the channel's
  latest conversation with the bot, as this process saw them; with neither (the first
  command after a restart), the channel itself, where ``/stop`` finds nothing running.

Each app command can be a chat command itself (``/stop``) or one app-wide command whose
first word is the chat command (``/talon stop``), for workspaces where the short names are
taken. The answer comes back in the acknowledgement, which Slack shows only to the user
who typed it; nothing is posted into the thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from connectors.base import InboundEvent, IntakeHandler, IntakeStatus, Sender, ThreadKey
from connectors.policy import ChannelPolicy
from connectors.slack.inbound import SkipEvent
from connectors.slack.memory import Recent
from connectors.slack.receiver import IntakeFailedError
from gateway.command_table import command_names, help_text

log = logging.getLogger("talon.slack")

_MAX_TEXT = 4000  # Slack caps a slash command's text far below this


@dataclass(frozen=True, slots=True)
class SlashCommand:
    command: str  # as typed: "/stop", "/talon"
    text: str
    channel_id: str
    user_id: str
    user_name: str
    trigger_id: str

    @property
    def chat_text(self) -> str | None:
        """The chat command this stands for (``/stop now``), or None when it is none of them."""
        name, words = self.command.lower(), self.text.strip()
        if name in command_names():
            return f"{name} {words}".strip()
        first, _, rest = words.partition(" ")
        candidate = "/" + first.lstrip("/").lower()
        return f"{candidate} {rest}".strip() if first and candidate in command_names() else None


def parse_slash_command(body: Any) -> SlashCommand:
    """Validate a slash command payload; :class:`SkipEvent` (malformed) when it is unusable."""
    if not isinstance(body, dict):
        raise SkipEvent("slash command payload is not an object", malformed=True)
    fields = {}
    for key in ("command", "channel_id", "user_id", "trigger_id"):
        value = body.get(key)
        if not isinstance(value, str) or not value or len(value) > 255:
            raise SkipEvent(f"slash command without a usable {key}", malformed=True)
        fields[key] = value
    if not fields["command"].startswith("/"):
        raise SkipEvent("slash command name does not start with /", malformed=True)
    text = body.get("text", "")
    if not isinstance(text, str) or len(text) > _MAX_TEXT:
        raise SkipEvent("slash command text is not a string within 4000 characters", malformed=True)
    user_name = body.get("user_name")
    return SlashCommand(
        text=text,
        user_name=user_name if isinstance(user_name, str) and user_name else fields["user_id"],
        **fields,
    )


class CommandThreads:
    """Which thread a slash command steers; see the module docstring."""

    def __init__(self, channel: str, limit: int = 4096):
        self._channel = channel
        self._by_user: Recent[tuple[str, str], ThreadKey] = Recent(limit)
        self._by_chat: Recent[str, ThreadKey] = Recent(limit)

    def addressed(self, key: ThreadKey, user_id: str) -> None:
        """``user_id`` addressed the bot in ``key``."""
        self._by_user.put((key.chat_id, user_id), key)
        self._by_chat.put(key.chat_id, key)

    def thread_for(self, channel_id: str, user_id: str) -> ThreadKey:
        if channel_id.startswith("D"):
            return ThreadKey(self._channel, channel_id, None)
        return (
            self._by_user.get((channel_id, user_id))
            or self._by_chat.get(channel_id)
            or ThreadKey(self._channel, channel_id, None)
        )


class SlashCommands:
    """Turns a slash command into a chat command through the intake; returns what to answer.

    Args:
        channel: the Talon channel name.
        policy: who may reach the bot (refused users get no answer, as for messages).
        intake: the gateway's intake, or None while the channel is stopping.
        threads: where each command steers.
    """

    def __init__(
        self,
        *,
        channel: str,
        policy: ChannelPolicy,
        intake: Callable[[], IntakeHandler | None],
        threads: CommandThreads,
    ):
        self._channel = channel
        self._policy = policy
        self._intake = intake
        self.threads = threads

    async def handle(self, body: dict[str, Any]) -> str | None:
        """The answer for the acknowledgement; None for no answer. Raises when intake fails
        (the command is then not acknowledged)."""
        try:
            command = parse_slash_command(body)
        except SkipEvent as skip:
            log.warning("skipped slack slash command: %s", skip.reason, extra={"channel": self._channel})
            return None
        if not self._policy.admits(command.user_id, command.channel_id, is_bot=False):
            return None
        chat_text = command.chat_text
        if chat_text is None:
            typed = f"{command.command} {command.text}".strip()
            return f"{typed} is not a command here.\n\n{help_text()}"
        intake = self._intake()
        if intake is None:
            raise IntakeFailedError(f"{self._channel} is stopping")
        key = self.threads.thread_for(command.channel_id, command.user_id)
        event = InboundEvent(
            channel=self._channel,
            event_id=f"slash:{command.trigger_id}",
            thread_key=key,
            chat_type="dm" if key.chat_id.startswith("D") else ("thread" if key.topic else "group"),
            sender=Sender(command.user_id, command.user_name),
            text=chat_text,
            mentions_bot=True,
            native_command=True,
            raw=body,
        )
        try:
            result = await intake(event)
        except Exception as exc:
            log.warning(
                "%s: intake failed for slash command %s (%s); not acknowledged",
                self._channel,
                command.command,
                type(exc).__name__,
                extra={"channel": self._channel, "event_id": event.event_id},
            )
            raise IntakeFailedError(event.event_id) from exc
        if result.status is IntakeStatus.UNROUTED:
            return "No persona answers in this chat, so there is nothing to steer."
        return result.reply
