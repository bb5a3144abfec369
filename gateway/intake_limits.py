"""What each channel allows at intake: how much text goes to the model, how fast a chat
is answered.

The pipeline asks before its commit (cut long text, decide when the message is due) and
after it (whether to tell the sender they are being slowed). Channels not named in the
config (tests, benchmarks) get the defaults.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from connectors.base import InboundEvent
from gateway.config import DEFAULT_MAX_INBOUND_CHARS, ChannelBase, RateLimitSettings
from gateway.intake_rate import PROMPT, Pace, RateLimiter, slow_down_notice
from gateway.intake_text import cut_long_text

_DEFAULT_RATE = RateLimitSettings()


@dataclass(frozen=True, slots=True)
class ChannelLimits:
    max_inbound_chars: int = DEFAULT_MAX_INBOUND_CHARS
    rate: RateLimitSettings | None = _DEFAULT_RATE  # None: answered as fast as they come


DEFAULTS = ChannelLimits()


def channel_limits(channels: Iterable[ChannelBase]) -> dict[str, ChannelLimits]:
    """Each configured channel's limits (the console has no rate limit)."""
    return {ch.name: ChannelLimits(ch.max_inbound_chars, ch.intake_rate) for ch in channels}


class IntakeLimits:
    """Args:
    files_dir: the root of inbound files; full texts land beside the channel's attachments.
    channels: limits by channel name.
    """

    def __init__(self, files_dir: Path, channels: Mapping[str, ChannelLimits] | None = None) -> None:
        self.files_dir = files_dir
        self._channels = dict(channels or {})
        self._rates = RateLimiter()

    def limits(self, channel: str) -> ChannelLimits:
        return self._channels.get(channel, DEFAULTS)

    def too_long(self, event: InboundEvent) -> bool:
        return len(event.text) > self.limits(event.channel).max_inbound_chars

    async def cut(self, event: InboundEvent) -> InboundEvent:
        """Cut the text to the channel's limit; the full text is on disk when this returns."""
        return await cut_long_text(event, self.limits(event.channel).max_inbound_chars, self.files_dir)

    def pace(self, event: InboundEvent, now: float) -> Pace:
        """When a message that wants a reply is due (counts it against the rate)."""
        rate = self.limits(event.channel).rate
        if rate is None:
            return PROMPT
        return self._rates.pace(event.thread_key, event.sender.id, event.chat_type != "dm", rate, now)

    def notice(self, event: InboundEvent, pace: Pace, now: float) -> str | None:
        """The slow-down notice for a deferred message: once per sender (or, when the whole
        chat is over its rate, once per chat) per window; None otherwise."""
        rate = self.limits(event.channel).rate
        if not pace.deferred or pace.reason is None or rate is None:
            return None
        key = event.thread_key
        in_group = event.chat_type != "dm"
        who = (key.channel, key.chat_id, event.sender.id if pace.reason == "sender" or not in_group else "")
        if not self._rates.should_notify(who, rate.window, now):
            return None
        name = (event.sender.display_name or event.sender.id) if in_group else None
        return slow_down_notice(pace.available_at - now, reason=pace.reason, sender_name=name)
