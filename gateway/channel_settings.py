"""The channels of talon.yaml: what every channel has, each platform's keys, pacing, the
intake rate limit and the start retries. :mod:`gateway.config` re-exports every name."""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator

from gateway.backoff import Backoff
from gateway.config_errors import NAME_PATTERN
from gateway.model_types import StrictModel as _Strict
from gateway.streaming_settings import StreamingKeys
from gateway.voice_settings import VoiceKeys

_NAME = NAME_PATTERN


class PacingSettings(_Strict):
    """Outbound pacing of a chat channel, below the platform's published limits; 0 turns a
    limit off (the platform's own 429s are still honoured)."""

    per_second: float = Field(0, ge=0, description="messages per second across the whole channel")
    per_chat_per_second: float = Field(0, ge=0, description="messages per second into one private chat")
    group_per_minute: float = Field(0, ge=0, description="messages per minute into one group or channel")
    burst: int = Field(3, ge=1, le=100, description="messages a chat may get back to back before pacing")
    max_in_flight: int = Field(16, ge=1, le=256, description="sends waiting for the platform at once")


def _pacing(**defaults: float) -> BeforeValidator:
    """A channel's ``pacing`` keys override its platform defaults one by one."""

    def merge(value: Any) -> Any:
        return {**defaults, **value} if isinstance(value, dict) else value

    return BeforeValidator(merge)


# Long text is cut at this many characters; the full text is kept as an attachment.
DEFAULT_MAX_INBOUND_CHARS = 20_000
_MIN_INBOUND_CHARS = 1_000


def _inbound_chars(value: int) -> int:
    if value < _MIN_INBOUND_CHARS:
        raise ValueError(
            f"must be at least {_MIN_INBOUND_CHARS} characters (the default is {DEFAULT_MAX_INBOUND_CHARS}); "
            "longer messages are cut there and the full text is attached"
        )
    return value


class RateLimitSettings(_Strict):
    """How many messages a chat channel answers promptly; messages over the rate are
    stored and answered together once the window allows. 0 turns a limit off."""

    per_user: int = Field(10, description="messages per window from one sender in a group (not in DMs)")
    per_chat: int = Field(30, description="messages per window in one chat, all senders; DMs too")
    window: float = Field(60.0, description="seconds the two counts cover")

    @field_validator("per_user", "per_chat")
    @classmethod
    def _count(cls, value: int) -> int:
        if value < 0:
            raise ValueError("must be 0 or more messages per window (0 turns this limit off)")
        return value

    @field_validator("window")
    @classmethod
    def _window(cls, value: float) -> float:
        if not 1 <= value <= 3600:
            raise ValueError("must be between 1 and 3600 seconds, e.g. window: 60")
        return value


class ChannelBase(StreamingKeys, VoiceKeys):
    """What every channel has, the console included; the gateway reads only these.

    Each channel type narrows ``type`` to its literal, which selects it in ``channels``.
    """

    name: str = Field(
        pattern=_NAME,
        description="what bindings, channel_send and `talon send` call it: lower-case letters, digits, - and _",
    )
    type: str
    home_chat: str | None = Field(
        None, description="chat id channel_send and `talon send` post to by default"
    )
    max_inbound_chars: int = Field(
        DEFAULT_MAX_INBOUND_CHARS, description="longer text is cut and attached in full"
    )

    _inbound_chars = field_validator("max_inbound_chars")(_inbound_chars)

    @field_validator("home_chat", mode="before")
    @classmethod
    def _home_as_string(cls, value: Any) -> Any:
        return None if value is None else str(value)

    @property
    def intake_rate(self) -> RateLimitSettings | None:
        """How fast the intake answers a chat; None: every message as it comes."""
        return None


class RolesSettings(_Strict):
    """Who holds which sender role in a channel (stable platform user ids); everyone else is
    a member. What each role may do is the persona's ``role_capabilities``."""

    owner: list[str] = Field([], description="user ids of the owners")
    admin: list[str] = Field([], description="user ids of the admins")
    guest: list[str] = Field([], description="user ids of the guests")

    @field_validator("owner", "admin", "guest", mode="before")
    @classmethod
    def _ids_as_strings(cls, value: Any) -> Any:
        return [str(v) for v in value] if isinstance(value, list) else value

    def role_of(self, sender_id: str | None) -> str:
        """``owner``, ``admin``, ``guest`` or ``member``; a user listed twice holds the narrower role."""
        for role in ("guest", "admin", "owner"):
            if sender_id is not None and sender_id in getattr(self, role):
                return role
        return "member"


SessionScope = Literal["chat", "user", "topic"]
SESSION_SCOPE_HELP = (
    "which messages share one conversation: chat (the whole chat, its topics too), user (each sender "
    "their own, within a topic), topic (each forum topic / Slack thread / Discord thread); null = topic"
)


class _ChatChannel(ChannelBase):
    roles: RolesSettings = Field(
        RolesSettings(), description="sender roles by user id; everyone else is a member"
    )
    session_scope: SessionScope | None = Field(None, description=SESSION_SCOPE_HELP)
    allowed_users: list[str] = Field(
        [], description="platform user ids that may reach the bot; empty = anyone"
    )
    allowed_chats: list[str] = Field([], description="platform chat ids the bot listens in; empty = any chat")
    trigger_words: list[str] = Field(
        [], description="in groups, words that make the bot answer without a mention"
    )
    require_mention: bool = Field(
        True,
        description="in groups, answer only when mentioned, replied to or triggered; false = every message",
    )
    allow_bots: bool = Field(False, description="accept messages from other bots")
    max_attachment_bytes: int = Field(
        20_000_000, ge=0, description="larger inbound files are skipped, with a note in the text"
    )
    rate_limit: RateLimitSettings = Field(
        RateLimitSettings(), description="messages answered promptly; the rest wait for the window"
    )

    @field_validator("allowed_users", "allowed_chats", mode="before")
    @classmethod
    def _ids_as_strings(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [str(v) for v in value]
        return value

    @property
    def intake_rate(self) -> RateLimitSettings | None:
        return self.rate_limit


# Telegram and Discord refresh a typing indicator while a turn runs, each with its own
# default (Slack marks the message with a reaction instead).
TypingInterval = Annotated[float, Field(gt=0, description="seconds between typing refreshes")]


class ConsoleChannel(ChannelBase):
    """The local console. No rate limit: only the daemon's owner reaches it (owner-only socket)."""

    type: Literal["console"] = Field(description="the local console: `talon chat`, over an owner-only socket")
    home_chat: str | None = Field("main", description="the console thread `talon send` posts to by default")


class TelegramChannel(_ChatChannel):
    type: Literal["telegram"] = Field(description="a Telegram bot (docs/platforms/telegram.md)")
    token: str = Field(description="the bot token from @BotFather")
    api_base_url: str | None = Field(None, description="Bot API server root; null = https://api.telegram.org")
    webhook_url: str | None = Field(
        None, description="public HTTPS URL Telegram posts updates to; null = long polling"
    )
    webhook_secret: str | None = Field(
        None,
        description="required with webhook_url: 1-256 of A-Z, a-z, 0-9, _ and -, checked on every update",
    )
    webhook_listen: str = Field("127.0.0.1", description="address the webhook server binds")
    webhook_port: int = Field(8443, ge=1, le=65535, description="port the webhook server binds")
    poll_timeout: int = Field(30, ge=0, le=50, description="getUpdates long-poll seconds")
    max_upload_bytes: int = Field(
        50_000_000,
        ge=1,
        description="largest file channel_send may attach (the Bot API's upload limit is 50 MB)",
    )
    max_photo_bytes: int = Field(
        10_000_000, ge=0, description="pictures up to this size are sent as photos, larger ones as documents"
    )
    typing_interval: TypingInterval = 4.0
    watchdog_seconds: float = Field(
        120.0, gt=0, description="a getUpdates call silent this long past the long poll rebuilds the poller"
    )
    # Telegram: about 30 messages/s per bot, 1/s per chat, 20/min per group.
    pacing: Annotated[PacingSettings, _pacing(per_second=30, per_chat_per_second=1, group_per_minute=20)] = (
        Field(
            PacingSettings(per_second=30, per_chat_per_second=1, group_per_minute=20),
            description="outbound pacing; the keys given override these defaults one by one",
        )
    )


class SlackChannel(_ChatChannel):
    type: Literal["slack"] = Field(description="a Slack app's bot user (docs/platforms/slack.md)")
    bot_token: str = Field(description="the Bot User OAuth Token, xoxb-...")
    app_token: str | None = Field(
        None, description="app-level token (xapp-..., connections:write) for Socket Mode; null = HTTP events"
    )
    signing_secret: str | None = Field(None, description="the app's signing secret; required for HTTP events")
    api_base_url: str | None = Field(
        None, description="Web API root (calls `<root>/api/<method>`); null = https://slack.com"
    )
    http_host: str = Field(
        "127.0.0.1", description="address the HTTP events listener binds (without app_token)"
    )
    http_port: int = Field(
        3000, ge=0, le=65535, description="port the HTTP events listener binds; 0 = any free port"
    )
    http_path: str = Field("/slack/events", description="the path of the Request URL Slack posts events to")
    max_upload_bytes: int = Field(
        1_000_000_000, ge=1, description="largest file channel_send may attach (Slack allows up to 1 GB)"
    )
    # Slack: about one message per second per channel.
    pacing: Annotated[PacingSettings, _pacing(per_chat_per_second=1, group_per_minute=60)] = Field(
        PacingSettings(per_chat_per_second=1, group_per_minute=60),
        description="outbound pacing; the keys given override these defaults one by one",
    )


class DiscordChannel(_ChatChannel):
    type: Literal["discord"] = Field(
        description="a Discord application's bot user (docs/platforms/discord.md)"
    )
    token: str = Field(description="the bot token from the Developer Portal's Bot page")
    api_base_url: str | None = Field(
        None, description="REST root (calls `<root>/api/v10/...`); null = https://discord.com"
    )
    gateway_url: str | None = Field(
        None, description="gateway websocket URL; null = the one Discord announces"
    )
    send_timeout: float = Field(60.0, gt=0, description="seconds per send, rate-limit waits included")
    max_upload_bytes: int = Field(
        10_000_000,
        ge=1,
        description="largest file channel_send may attach (10 MB without server boosts; raise it for boosted servers)",
    )
    typing_interval: TypingInterval = 8.0
    shard_count: int = Field(
        1,
        ge=1,
        le=4096,
        description="gateway sessions (shards) the bot's guilds are split over; Discord requires "
        "sharding from 2,500 guilds and GET /gateway/bot recommends a count. In a cluster each "
        "shard is received by one node at a time (docs/scaling.md)",
    )
    # Discord: discord.py already waits on Discord's per-route buckets.
    pacing: PacingSettings = Field(PacingSettings(), description="outbound pacing; all limits off by default")


class WebSite(_Strict):
    """One site that may embed the web chat widget: its token and the origins it is served from."""

    token: str = Field(
        min_length=16,
        description='the site\'s widget token (write it as "${TALON_WEB_SITE_TOKEN}"); at least 16 characters',
    )
    origins: list[str] = Field(
        min_length=1,
        description="origins the widget runs on, scheme://host[:port] exactly as browsers send them, "
        'e.g. ["https://www.example.com"]',
    )

    @field_validator("origins")
    @classmethod
    def _origin_shape(cls, value: list[str]) -> list[str]:
        for origin in value:
            scheme, sep, rest = origin.partition("://")
            if scheme not in ("http", "https") or not sep or not rest or "/" in rest:
                raise ValueError(
                    f"{origin!r} is not an origin: write scheme://host[:port] with no path, "
                    "e.g. https://www.example.com"
                )
        return value


class WebChannel(_ChatChannel):
    type: Literal["web"] = Field(
        description="the web chat page and embeddable widget, served by the HTTP server (docs/platforms/web.md)"
    )
    sites: list[WebSite] = Field(
        [], description="sites whose pages may run the chat widget; each visitor is one chat"
    )
    max_upload_bytes: int = Field(
        50_000_000, ge=1, description="largest file channel_send may attach (downloaded from the chat page)"
    )
    max_files_per_message: int = Field(10, ge=0, le=50, description="files one message may carry")
    max_streams_per_visitor: int = Field(
        5, ge=1, le=100, description="event streams (open chat tabs) one visitor may hold at once"
    )
    cookie_days: int = Field(
        365, ge=1, le=3650, description="days a visitor keeps their chat (signed cookie)"
    )
    console_users: bool = Field(
        True,
        description="users signed in to the web console chat on the channel's page as themselves",
    )


ChannelSettings = Annotated[
    ConsoleChannel | TelegramChannel | SlackChannel | DiscordChannel | WebChannel,
    Field(discriminator="type"),
]

# The environment variable a user is told to set when a secret is empty.
SECRET_HINTS: dict[tuple[str, str], str] = {
    ("telegram", "token"): "TELEGRAM_BOT_TOKEN",
    ("slack", "bot_token"): "SLACK_BOT_TOKEN",
    ("slack", "app_token"): "SLACK_APP_TOKEN",
    ("discord", "token"): "DISCORD_BOT_TOKEN",
    ("anthropic", "api_key"): "ANTHROPIC_API_KEY",
    ("openai", "api_key"): "OPENAI_API_KEY",
}


class ChannelRetrySettings(_Strict):
    """How a channel that could not start, or whose platform library gave up, is tried again.
    A rejected token is not retried: the channel stays failed with the reason."""

    backoff_base: float = Field(2.0, gt=0, description="first retry delay, seconds")
    backoff_max: float = Field(300.0, gt=0, description="longest retry delay, seconds; retries never stop")

    @cached_property
    def backoff(self) -> Backoff:
        """Delays between the start attempts of one channel."""
        return Backoff(base=self.backoff_base, max=self.backoff_max)
