"""The channel supervisor: transient start failures are retried with backoff and shown as
``retrying`` with the last error; a refusal stays ``failed``; a channel whose library gave up
at run time (``restartable``) is stopped and started again."""

from __future__ import annotations

import asyncio
import time

from connectors.base import (
    ConnectorHealth,
    ConnectorStartError,
    InboundEvent,
    IntakeResult,
    IntakeStatus,
    OutboundChunk,
    RenderedChunk,
    SendResult,
    ThreadKey,
)
from gateway.backoff import Backoff
from gateway.channel_supervisor import ChannelSupervisor
from gateway.status import channel_status

FAST = Backoff(base=0.05, max=0.1, jitter=0)


class ScriptedChannel:
    """A channel whose starts fail with the scripted errors, then succeed."""

    idempotent_send = True

    def __init__(self, name: str, failures: list[Exception]) -> None:
        self.name = name
        self.health = ConnectorHealth()
        self.failures = failures
        self.starts = 0
        self.stops = 0

    async def start(self, intake: object) -> None:
        self.starts += 1
        if self.failures:
            raise self.failures.pop(0)
        self.health.set("connected")

    async def stop(self) -> None:
        self.stops += 1
        self.health.set("stopped")

    def render(self, markdown: str) -> list[RenderedChunk]:
        return [RenderedChunk(markdown, markdown, "plain")]

    async def send(self, item: OutboundChunk) -> SendResult:
        return SendResult.sent(None)

    async def set_working(self, thread: ThreadKey, working: bool) -> None:
        return None


async def _intake(event: InboundEvent) -> IntakeResult:
    return IntakeResult(IntakeStatus.STORED)


async def _until(check: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)


async def test_a_transient_failure_is_retried_and_shown_until_the_channel_runs() -> None:
    channel = ScriptedChannel("tg", [ConnectorStartError("tg: 502 Bad Gateway", transient=True)] * 2)
    supervisor = ChannelSupervisor({"tg": channel}, _intake, Backoff(base=0.3, max=0.3, jitter=0))
    await supervisor.start()
    try:
        status = channel_status(channel)
        assert (status.state, status.detail) == ("retrying", "tg: 502 Bad Gateway")
        assert status.retry_in is not None and 0 < status.retry_in <= 0.3
        await _until(lambda: channel.health.state == "connected")
        assert channel.starts == 3
        assert channel_status(channel).retry_in is None
    finally:
        await supervisor.stop()


async def test_an_error_nobody_classified_is_retried_too() -> None:
    channel = ScriptedChannel("tg", [OSError("network is unreachable")])
    supervisor = ChannelSupervisor({"tg": channel}, _intake, FAST)
    await supervisor.start()
    try:
        assert channel.health.detail == "OSError: network is unreachable"
        await _until(lambda: channel.health.state == "connected")
    finally:
        await supervisor.stop()


async def test_a_refusal_stays_failed_and_is_not_retried() -> None:
    channel = ScriptedChannel("tg", [ConnectorStartError("tg: Telegram rejected the bot token (401)")])
    supervisor = ChannelSupervisor({"tg": channel}, _intake, FAST)
    await supervisor.start()
    try:
        await asyncio.sleep(0.5)
        assert (channel.health.state, channel.health.detail) == (
            "failed",
            "tg: Telegram rejected the bot token (401)",
        )
        assert channel.starts == 1
    finally:
        await supervisor.stop()


async def test_a_channel_whose_library_gave_up_is_restarted() -> None:
    channel = ScriptedChannel("tg", [])
    supervisor = ChannelSupervisor({"tg": channel}, _intake, FAST, watch_interval=0.02)
    await supervisor.start()
    try:
        channel.health.set("failed", "the update poller stopped: RuntimeError: boom", restartable=True)
        await _until(lambda: channel.starts == 2 and channel.health.state == "connected")
        assert channel.stops == 1
        channel.health.set("failed", "Telegram rejected the bot token")  # not restartable
        await asyncio.sleep(0.3)
        assert channel.starts == 2 and channel.health.state == "failed"
    finally:
        await supervisor.stop()
