"""The shared retry rules: how long to wait, what to retry, when to give up."""

from __future__ import annotations

import asyncio
import email.utils
import time

import pytest

from gateway.backoff import Backoff
from gateway.runtime.model import ProviderError
from gateway.runtime.providers.retry import (
    RetryableError,
    RetryPolicy,
    StreamTracker,
    classify_status,
    parse_retry_after,
    run_with_retries,
)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "soon"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str] | None, expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_parse_retry_after_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert parse_retry_after({"retry-after": when}) == pytest.approx(30, abs=2)


def test_backoff_doubles_with_jitter_and_a_ceiling() -> None:
    policy = RetryPolicy(max_retries=10, backoff=Backoff(base=0.5, max=3.0))
    for retry, ceiling in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 3.0), (8, 3.0)]:
        delays = [policy.delay(retry, None) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    policy = RetryPolicy(retry_after_cap=60)
    assert policy.delay(0, 12) == 12
    assert policy.delay(5, 600) == 60


@pytest.mark.parametrize(
    ("status", "error_type"), [(429, None), (500, None), (503, None), (529, None), (200, "overloaded_error")]
)
def test_retryable_statuses(status: int, error_type: str | None) -> None:
    assert isinstance(classify_status("p", status, "busy", error_type=error_type), RetryableError)


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_final_statuses(status: int) -> None:
    error = classify_status("p", status, "bad key", error_type="authentication_error")
    assert isinstance(error, ProviderError)
    assert error.transient is False
    assert "bad key" in str(error)


async def test_a_wait_past_the_deadline_gives_up_at_once() -> None:
    async def attempt(remaining: float) -> str:
        raise RetryableError("busy", retry_after=30)

    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        await run_with_retries(attempt, RetryPolicy(max_retries=3), provider="p", timeout=1.0)

    assert time.monotonic() - started < 0.5
    assert caught.value.transient is True
    assert caught.value.retry_after == 30


async def test_attempts_get_the_time_left() -> None:
    budgets: list[float] = []

    async def attempt(remaining: float) -> str:
        budgets.append(remaining)
        if len(budgets) < 3:
            await asyncio.sleep(0.05)
            raise RetryableError("busy", retry_after=0)
        return "ok"

    assert await run_with_retries(attempt, RetryPolicy(max_retries=3), provider="p", timeout=5.0) == "ok"
    assert budgets[0] > budgets[1] > budgets[2]
    assert budgets[0] <= 5.0


async def test_streamed_text_stops_retries() -> None:
    tracker = StreamTracker()
    calls = 0

    async def attempt(remaining: float) -> str:
        nonlocal calls
        calls += 1
        tracker.started = True
        raise RetryableError("connection reset")

    with pytest.raises(ProviderError, match="streamed"):
        await run_with_retries(
            attempt, RetryPolicy(max_retries=3), provider="p", timeout=5.0, tracker=tracker
        )
    assert calls == 1
