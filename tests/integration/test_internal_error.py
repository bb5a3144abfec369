"""A bug in turn code costs at most two model calls: the turn is tried once more, then
dead-lettered; the chat hears it was an internal error and ``talon status`` names it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from gateway import turns
from gateway.runtime.agent import TurnResult, run_agent
from gateway.turn_notices import INTERNAL
from tests.fakes.model_api import FakeAnthropic
from tests.harness import provider_for, running_gateway, say, write_config


async def test_a_turn_that_raises_a_programming_error_is_tried_twice_then_dead_lettered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def answer_then_break(*args: Any, **kwargs: Any) -> TurnResult:
        result = await run_agent(*args, **kwargs)
        return {"text": result.text}["usage"]  # type: ignore[return-value]  # a bug reading the result

    monkeypatch.setattr(turns, "run_agent", answer_then_break)
    async with FakeAnthropic() as fake:
        config = write_config(tmp_path, provider=provider_for(fake), extra={"queue": {"max_attempts": 5}})
        async with running_gateway(config) as gw:
            turn = await say(gw, "hello")
            status = await gw.components.status.report()

    assert len(fake.requests) == 2  # with max_attempts 5, a provider failure would get 5
    assert turn.status == "failed" and turn.text == INTERNAL
    (dead,) = status.dead_letters
    assert dead.thread_id == turn.intake.thread_id and dead.attempts == 2
    assert dead.last_error == "internal error: KeyError: 'usage'"
    logged = [
        r for r in caplog.records if r.exc_info and r.levelno >= logging.ERROR and r.name == "talon.queue"
    ]
    assert len(logged) == 1 and "KeyError" in logging.Formatter().formatException(logged[0].exc_info)
