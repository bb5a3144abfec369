"""The one retry-delay model: the doubling sequence, the cap, the jitter bounds, and the
numbers each part that retries keeps as its default."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.discord_bot.connector import DEFAULT_INTAKE_RETRY
from connectors.slack.socket import DEFAULT_RECONNECT
from connectors.telegram import TelegramTuning
from gateway.backoff import Backoff
from gateway.config import OutboxSettings, QueueSettings, load_settings
from gateway.runtime.providers.retry import MODEL_CALL_BACKOFF, RetryPolicy


def test_delays_double_from_base_up_to_the_cap() -> None:
    backoff = Backoff(base=1.0, max=60.0, jitter=0)
    assert [backoff.delay(attempt) for attempt in range(1, 10)] == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    assert Backoff(base=0.5, max=3.0, jitter=0).delay(3) == 2.0
    assert backoff.delay(0) == 1.0  # before any retry counts as the first


def test_the_cap_holds_after_any_number_of_failures() -> None:
    backoff = Backoff(base=2.0, max=300.0)
    assert backoff.ceiling(10_000) == 300.0  # no OverflowError from 2 ** 9999
    assert all(150.0 <= backoff.delay(10_000) <= 300.0 for _ in range(100))
    assert Backoff(base=5.0, max=1.0, jitter=0).delay(1) == 1.0  # a cap below base wins


@pytest.mark.parametrize(("jitter", "low"), [(0.5, 0.5), (0.25, 0.75), (1.0, 0.0)])
def test_jitter_draws_from_the_top_share_of_each_delay(jitter: float, low: float) -> None:
    backoff = Backoff(base=1.0, max=60.0, jitter=jitter)
    for attempt, ceiling in [(1, 1.0), (3, 4.0), (12, 60.0)]:
        delays = [backoff.delay(attempt) for _ in range(200)]
        assert all(low * ceiling <= d <= ceiling for d in delays)
        assert len(set(delays)) > 100  # random, not one fixed point of the range


@pytest.mark.parametrize(
    "values", [{"base": 0, "max": 1}, {"base": 1, "max": -1}, {"base": 1, "max": 2, "jitter": 1.5}]
)
def test_nonsense_is_refused(values: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="backoff"):
        Backoff(**values)


def test_each_part_keeps_its_numbers() -> None:
    assert QueueSettings().backoff == Backoff(base=2.0, max=300.0)
    assert OutboxSettings().backoff == Backoff(base=1.0, max=300.0)
    assert TelegramTuning().backoff == Backoff(base=1.0, max=60.0)
    assert DEFAULT_RECONNECT == Backoff(base=1.0, max=60.0)
    assert DEFAULT_INTAKE_RETRY == Backoff(base=0.5, max=30.0, jitter=0)
    assert RetryPolicy().backoff == MODEL_CALL_BACKOFF == Backoff(base=0.5, max=30.0)


def test_the_flat_talon_yaml_keys_set_the_model(tmp_path: Path) -> None:
    (tmp_path / "talon.yaml").write_text(
        "queue: {backoff_base: 0.5, backoff_max: 4}\noutbox: {backoff_base: 3, backoff_max: 90}\n"
    )
    settings = load_settings(tmp_path / "talon.yaml")
    assert settings.queue.backoff == Backoff(base=0.5, max=4.0)
    assert settings.outbox.backoff == Backoff(base=3.0, max=90.0)
