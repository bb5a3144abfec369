"""One group chat on each platform fake, for the turn tests of roles, sessions, budgets and
fallback: the channel entry for talon.yaml, a member saying something to the bot (with a
mention, so the group's ``require_mention`` lets it through), and the replies the bot posted
with the platform's place for them (forum topic, Slack thread, Discord reply).

It only adapts the fakes of tests/fakes/ and the in-process gateway of tests/harness.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gateway.daemon import Gateway
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.model_api import FakeAnthropic
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.harness import provider_for, running_gateway, write_config

CHANNEL = "team"
PLATFORMS = ["telegram", "slack", "discord"]
WAIT = 30.0
_NO_PACING = {"per_second": 0, "per_chat_per_second": 0, "group_per_minute": 0}


@dataclass(frozen=True, slots=True)
class Posted:
    """A reply the bot posted: its text and where (topic/thread id, or None for the chat)."""

    text: str
    place: str | None


class Group(Protocol):
    platform: str
    users: tuple[str, str]  # two members' stable platform ids

    def channel(self) -> dict[str, Any]: ...

    async def connected(self, gateway: Gateway) -> None: ...

    async def say(self, user: str, text: str, *, place: str | None = None) -> str | None:
        """Post as ``user``; returns the message's place (a new Slack message opens its own thread)."""

    async def replies(self, n: int) -> list[Posted]: ...

    def operator_chat(self) -> str:
        """A chat of the operator's (made known to the platform), for ``operator.chat``."""

    async def operator_notices(self, n: int) -> list[str]: ...


class _Telegram:
    platform = "telegram"
    users = ("101", "202")
    chat = -1001234567890

    def __init__(self, fake: FakeTelegramAPI):
        self.fake = fake

    def channel(self) -> dict[str, Any]:
        return {
            "type": "telegram",
            "token": self.fake.token,
            "api_base_url": self.fake.url,
            "pacing": _NO_PACING,
        }

    async def connected(self, gateway: Gateway) -> None:
        return None

    async def say(self, user: str, text: str, *, place: str | None = None) -> str | None:
        topic = int(place) if place else None
        self.fake.inject_message(
            self.chat,
            f"@talon_test_bot {text}",
            user_id=int(user),
            chat_type="supergroup",
            message_thread_id=topic,
        )
        return place

    async def replies(self, n: int) -> list[Posted]:
        sent = await self.fake.wait_for_sent(self.chat, n, timeout=WAIT)
        return [Posted(m.text, str(m.message_thread_id) if m.message_thread_id else None) for m in sent]

    def operator_chat(self) -> str:
        self.fake.add_chat(555, "private", user_id=555)
        return "555"

    async def operator_notices(self, n: int) -> list[str]:
        return [m.text for m in await self.fake.wait_for_sent(555, n, timeout=WAIT)]


class _Slack:
    platform = "slack"
    users = ("U0HUMAN01", "U0HUMAN02")
    chat = "C0GENERAL"

    def __init__(self, fake: FakeSlack):
        self.fake = fake
        self._sockets = fake.connections

    def channel(self) -> dict[str, Any]:
        return {
            "type": "slack",
            "bot_token": self.fake.bot_token,
            "app_token": self.fake.app_token,
            "api_base_url": self.fake.base_url,
            "pacing": _NO_PACING,
        }

    async def connected(self, gateway: Gateway) -> None:
        await self.fake.wait_for_connections(self._sockets + 1, timeout=WAIT)
        self._sockets = self.fake.connections

    async def say(self, user: str, text: str, *, place: str | None = None) -> str | None:
        ts = await self.fake.inject_message(
            self.chat, text, user=user, channel_type="channel", thread_ts=place, mention=True
        )
        return place or ts

    async def replies(self, n: int) -> list[Posted]:
        posted = await self.fake.wait_for_posted(self.chat, n, timeout=WAIT)
        return [Posted(m.text, m.thread_ts) for m in posted]

    def operator_chat(self) -> str:
        return "D0OPERATR"

    async def operator_notices(self, n: int) -> list[str]:
        return [m.text for m in await self.fake.wait_for_posted("D0OPERATR", n, timeout=WAIT)]


class _Discord:
    platform = "discord"
    users = ("300000000000000001", "300000000000000002")
    chat = "400000000000000001"

    def __init__(self, fake: FakeDiscord):
        self.fake = fake

    def channel(self) -> dict[str, Any]:
        return {
            "type": "discord",
            "token": self.fake.token,
            "api_base_url": self.fake.api_base_url,
            "gateway_url": self.fake.gateway_url,
        }

    async def connected(self, gateway: Gateway) -> None:
        await self.fake.wait_for_ready(timeout=WAIT)

    async def say(self, user: str, text: str, *, place: str | None = None) -> str | None:
        self.fake.inject_message(self.chat, text, author_id=user, mention_bot=True, thread_id=place)
        return place

    async def replies(self, n: int) -> list[Posted]:
        sent = await self.fake.wait_for_sent(self.chat, n, timeout=WAIT)
        return [Posted(m["content"], None) for m in sent]

    def operator_chat(self) -> str:
        # The operator's channel becomes known to the fake when the operator first posts there.
        self.fake.inject_message("400000000000000009", "ops here", author_id="300000000000000009")
        return "400000000000000009"

    async def operator_notices(self, n: int) -> list[str]:
        return [m["content"] for m in await self.fake.wait_for_sent("400000000000000009", n, timeout=WAIT)]


@contextlib.asynccontextmanager
async def group_on(platform: str) -> AsyncIterator[Group]:
    """The fake of ``platform`` running, as a :class:`Group`."""
    if platform == "telegram":
        async with FakeTelegramAPI() as telegram:
            yield _Telegram(telegram)
    elif platform == "slack":
        async with FakeSlack() as slack:
            yield _Slack(slack)
    else:
        async with FakeDiscord() as discord:
            yield _Discord(discord)


@contextlib.asynccontextmanager
async def group_gateway(
    root: Path,
    group: Group,
    model: FakeAnthropic,
    *,
    channel: dict[str, Any] | None = None,
    personas: dict[str, dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
    provider: dict[str, Any] | None = None,
) -> AsyncIterator[Gateway]:
    """A running gateway with ``group``'s channel (``channel`` adds keys) bound to ``assistant``."""
    entry = {"name": CHANNEL, **group.channel(), **(channel or {})}
    config = write_config(
        root,
        provider=provider or provider_for(model),
        extra={
            "channels": [entry],
            "bindings": [{"channel": CHANNEL, "persona": "assistant"}],
            **(extra or {}),
        },
        personas=personas,
    )
    async with running_gateway(config) as gateway:
        await group.connected(gateway)
        yield gateway
