"""Shared pieces for the Telegram connector tests: the fake API, settings and an intake."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from connectors.base import ConnectorHealth, InboundEvent, IntakeResult, IntakeStatus
from connectors.telegram import TelegramConnector, TelegramTuning
from gateway.backoff import Backoff
from gateway.config import TelegramChannel
from tests.fakes.telegram_api import FakeTelegramAPI

CHANNEL = "team-telegram"
TYPING_INTERVAL = 0.05
FAST = TelegramTuning(
    backoff=Backoff(base=0.02, max=0.2),
    typing_max=30.0,
    connect_timeout=2.0,
    read_timeout=5.0,
    write_timeout=5.0,
)


class RecordingIntake:
    """An intake that records events; ``fail_times`` makes the first calls raise and
    ``block`` makes calls wait until it is set (to simulate a crash mid-commit)."""

    def __init__(self, *, fail_times: int = 0) -> None:
        self.events: list[InboundEvent] = []
        self.calls = 0
        self.fail_times = fail_times
        self.block: asyncio.Event | None = None
        self._changed = asyncio.Event()

    async def __call__(self, event: InboundEvent) -> IntakeResult:
        self.calls += 1
        self._changed.set()
        if self.calls <= self.fail_times:
            raise RuntimeError("database is locked")
        if self.block is not None:
            await self.block.wait()
        self.events.append(event)
        self._changed.set()
        return IntakeResult(IntakeStatus.ACCEPTED, 1, 1)

    async def wait_for(self, n: int, timeout: float = 5.0) -> list[InboundEvent]:
        """Wait until ``n`` events were committed; TimeoutError otherwise."""
        async with asyncio.timeout(timeout):
            while len(self.events) < n:
                self._changed.clear()
                await self._changed.wait()
        return self.events

    async def wait_for_calls(self, n: int, timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            while self.calls < n:
                self._changed.clear()
                await self._changed.wait()


class HealthLog(ConnectorHealth):
    """Connector health that remembers every state it passed through."""

    def __init__(self) -> None:
        super().__init__()
        self.history: list[tuple[str, str]] = []

    def set(self, state: str, detail: str = "") -> None:
        super().set(state, detail)
        self.history.append((state, detail))

    def states(self) -> list[str]:
        return [state for state, _ in self.history]


def make_settings(fake: FakeTelegramAPI, **overrides: Any) -> TelegramChannel:
    values: dict[str, Any] = {
        "name": CHANNEL,
        "type": "telegram",
        "token": fake.token,
        "api_base_url": fake.url,
        "poll_timeout": 1,
        "watchdog_seconds": 30.0,
        "typing_interval": TYPING_INTERVAL,
        **overrides,
    }
    return TelegramChannel.model_validate(values)


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegramAPI]:
    async with FakeTelegramAPI() as api:
        yield api


@pytest.fixture
def files_dir(tmp_path: Path) -> Path:
    return tmp_path / "files"


StartConnector = Callable[..., Awaitable[tuple[TelegramConnector, RecordingIntake]]]


@pytest.fixture
async def start_connector(fake: FakeTelegramAPI, files_dir: Path) -> AsyncIterator[StartConnector]:
    """Start connectors against the fake; every one is stopped at the end of the test."""
    started: list[TelegramConnector] = []

    async def start(
        intake: RecordingIntake | None = None, *, tuning: TelegramTuning = FAST, **overrides: Any
    ) -> tuple[TelegramConnector, RecordingIntake]:
        connector = TelegramConnector(make_settings(fake, **overrides), files_dir=files_dir, tuning=tuning)
        connector.health = HealthLog()
        intake = intake or RecordingIntake()
        started.append(connector)
        await connector.start(intake)
        return connector, intake

    yield start
    for connector in started:
        with contextlib.suppress(Exception):
            await connector.stop()


async def wait_until(predicate: Callable[[], bool], timeout: float = 5.0, step: float = 0.005) -> None:
    """Poll ``predicate`` until true; TimeoutError otherwise.

    For state that offers no event to wait on (connector health, the fake's queues).
    """
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(step)
