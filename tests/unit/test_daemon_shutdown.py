"""At shutdown a channel that does not disconnect is left behind after a bound, with a warning,
instead of holding the daemon (and its database) open forever."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from gateway import daemon


class HangingChannel:
    name = "stuck"

    def __init__(self) -> None:
        self.cancelled = False

    async def stop(self) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


class BrokenChannel:
    name = "broken"

    async def stop(self) -> None:
        raise RuntimeError("socket already closed")


async def test_a_channel_that_hangs_on_stop_is_left_behind(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(daemon, "CHANNEL_STOP_TIMEOUT", 0.2)
    stuck = HangingChannel()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="talon.daemon"):
        await asyncio.gather(daemon._stop_channel(stuck), daemon._stop_channel(BrokenChannel()))  # type: ignore[arg-type]
    assert time.monotonic() - started < 2 and stuck.cancelled
    messages = [r.getMessage() for r in caplog.records]
    assert "channel stuck did not stop within 0.2 s; shutting down without it" in messages
    assert "channel broken failed while stopping" in messages
