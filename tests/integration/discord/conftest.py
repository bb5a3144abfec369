"""Fixtures: a fake Discord, and DiscordConnectors started against it with a recording intake."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from connectors.base import InboundEvent, IntakeResult, IntakeStatus
from connectors.discord_bot import DiscordConnector
from gateway.backoff import Backoff
from gateway.config import DiscordChannel
from tests.fakes.discord_api import FakeDiscord

CHANNEL = "team-discord"


class Recorder:
    """An intake that records events; ``fail_next`` makes the next calls raise, and
    ``failures[event_id]`` the next calls for that event."""

    def __init__(self) -> None:
        self.events: list[InboundEvent] = []
        self.calls: list[str] = []
        self.fail_next = 0
        self.failures: dict[str, int] = {}

    async def __call__(self, event: InboundEvent) -> IntakeResult:
        self.calls.append(event.event_id)
        if self.fail_next or self.failures.get(event.event_id):
            if self.fail_next:
                self.fail_next -= 1
            else:
                self.failures[event.event_id] -= 1
            raise RuntimeError("database is locked")
        self.events.append(event)
        return IntakeResult(IntakeStatus.ACCEPTED, 1, 1)

    async def wait_for(self, n: int, timeout: float = 5.0) -> list[InboundEvent]:
        await wait_until(lambda: len(self.events) >= n, timeout, f"{n} events")
        return self.events

    def by_id(self, event_id: str) -> InboundEvent:
        return next(e for e in self.events if e.event_id == event_id)


async def wait_until(done: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def discord_settings(fake: FakeDiscord, **overrides: Any) -> DiscordChannel:
    values: dict[str, Any] = {
        "name": CHANNEL,
        "type": "discord",
        "token": fake.token,
        "api_base_url": fake.api_base_url,
        "gateway_url": fake.gateway_url,
    }
    values.update(overrides)
    return DiscordChannel(**values)


StartConnector = Callable[..., Awaitable[tuple[DiscordConnector, Recorder]]]


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@pytest.fixture
async def start_connector(fake: FakeDiscord, tmp_path: Path) -> AsyncIterator[StartConnector]:
    """``await start_connector(**settings_overrides)`` -> (connector, recorder), connected."""
    started: list[DiscordConnector] = []

    async def start(
        *, server: FakeDiscord | None = None, send_timeout: float = 5.0, **overrides: Any
    ) -> tuple[DiscordConnector, Recorder]:
        target = server or fake
        connector = DiscordConnector(
            discord_settings(target, **{"typing_interval": 0.05, **overrides}),
            files_dir=tmp_path / "files",
            send_timeout=send_timeout,
            intake_retry=Backoff(base=0.05, max=30.0, jitter=0),
        )
        recorder = Recorder()
        await connector.start(recorder)
        started.append(connector)
        await wait_until(lambda: connector.health.state == "connected", 5.0, "connected")
        return connector, recorder

    yield start
    for connector in started:
        await connector.stop()
