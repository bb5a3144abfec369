"""Shared pieces for the Slack connector tests: the fake, a recording intake, a runner."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from connectors.base import (
    InboundEvent,
    IntakeResult,
    IntakeStatus,
    OutboundChunk,
    RenderedChunk,
    SendResult,
    ThreadKey,
)
from connectors.slack import SlackConnector
from gateway.backoff import Backoff
from gateway.config import SlackChannel
from tests.fakes.slack_api import FakeSlack


class Recorder:
    """An intake that records events; ``failures`` makes the next calls raise."""

    def __init__(self) -> None:
        self.events: list[InboundEvent] = []
        self.attempts: list[InboundEvent] = []
        self.failures = 0

    async def __call__(self, event: InboundEvent) -> IntakeResult:
        self.attempts.append(event)
        if self.failures:
            self.failures -= 1
            raise RuntimeError("database is locked")
        self.events.append(event)
        return IntakeResult(IntakeStatus.ACCEPTED, 1, len(self.events))

    async def wait_for(self, n: int, timeout: float = 5.0) -> list[InboundEvent]:
        deadline = time.monotonic() + timeout
        while len(self.events) < n:
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {n} intake events (got {len(self.events)})")
            await asyncio.sleep(0.01)
        return self.events


def slack_settings(fake: FakeSlack, **overrides: Any) -> SlackChannel:
    data: dict[str, Any] = {
        "name": "team-slack",
        "type": "slack",
        "bot_token": fake.bot_token,
        "app_token": fake.app_token,
        "api_base_url": fake.base_url,
    }
    data.update(overrides)
    return SlackChannel.model_validate(data)


def make_connector(fake: FakeSlack, files_dir: Path, **overrides: Any) -> SlackConnector:
    timeout = overrides.pop("request_timeout", 3.0)
    return SlackConnector(
        slack_settings(fake, **overrides),
        files_dir=files_dir,
        request_timeout=timeout,
        ping_interval=0.2,
        reconnect=Backoff(base=0.05, max=0.2),
    )


@asynccontextmanager
async def running(
    fake: FakeSlack, files_dir: Path, **overrides: Any
) -> AsyncIterator[tuple[SlackConnector, Recorder]]:
    """A started connector (Socket Mode unless ``app_token=None``) and its recording intake."""
    connector = make_connector(fake, files_dir, **overrides)
    recorder = Recorder()
    await connector.start(recorder)
    if connector.events_url:
        fake.events_url = connector.events_url
    else:
        await fake.wait_for_connections(1)
    try:
        yield connector, recorder
    finally:
        await connector.stop()


_deliveries = iter(range(1, 1_000_000))


async def send_text(
    connector: SlackConnector,
    thread: ThreadKey,
    text: str,
    *,
    fmt: str = "mrkdwn",
    reply_to: str | None = None,
) -> SendResult:
    """Send one hand-made chunk as the outbox would."""
    chunk = RenderedChunk(text=text, plain=text, format=fmt)
    return await connector.send(OutboundChunk(next(_deliveries), thread, chunk, reply_to))


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


@pytest.fixture
def files_dir(tmp_path: Path) -> Path:
    return tmp_path / "files"
