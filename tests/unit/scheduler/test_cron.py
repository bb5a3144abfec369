"""Cron validation, one-shot parsing and DST-correct next runs."""

from __future__ import annotations

import time
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from gateway.scheduler import Scheduler
from gateway.scheduling.cron import ScheduleError, parse_run_at, validate_cron
from gateway.scheduling.due import plan_cron
from tests.unit.scheduler.support import local

BERLIN = "Europe/Berlin"
NEW_YORK = "America/New_York"


def occurrences(expr: str, tz: str, start: float, end: float) -> list[str]:
    """Local ISO times of every occurrence in [start, end)."""
    out, cursor = [], start - 1
    while (cursor := Scheduler.next_run(expr, tz, cursor)) < end:
        out.append(datetime.fromtimestamp(cursor, ZoneInfo(tz)).isoformat())
    return out


def test_spring_forward_fixed_time_runs_once_shifted_past_the_gap() -> None:
    # 2025-03-30 02:00 -> 03:00 in Berlin: 02:30 does not exist that day.
    runs = occurrences("30 2 * * *", BERLIN, local(BERLIN, 2025, 3, 29), local(BERLIN, 2025, 4, 1))
    assert runs == [
        "2025-03-29T02:30:00+01:00",
        "2025-03-30T03:00:00+02:00",
        "2025-03-31T02:30:00+02:00",
    ]


def test_fall_back_fixed_time_runs_once_not_in_the_repeated_hour() -> None:
    # 2025-10-26 03:00 -> 02:00 in Berlin: 02:30 happens twice on the wall clock.
    runs = occurrences("30 2 * * *", BERLIN, local(BERLIN, 2025, 10, 25), local(BERLIN, 2025, 10, 28))
    assert runs == [
        "2025-10-25T02:30:00+02:00",
        "2025-10-26T02:30:00+02:00",
        "2025-10-27T02:30:00+01:00",
    ]


def test_new_york_fall_back_and_spring_forward() -> None:
    fall = occurrences("30 1 * * *", NEW_YORK, local(NEW_YORK, 2025, 11, 1, 12), local(NEW_YORK, 2025, 11, 4))
    assert fall == ["2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00"]
    spring = occurrences(
        "30 2 * * *", NEW_YORK, local(NEW_YORK, 2025, 3, 8, 12), local(NEW_YORK, 2025, 3, 11)
    )
    assert spring == ["2025-03-09T03:00:00-04:00", "2025-03-10T02:30:00-04:00"]


def test_hourly_follows_elapsed_time_across_both_changes() -> None:
    short_day = occurrences("0 * * * *", BERLIN, local(BERLIN, 2025, 3, 30), local(BERLIN, 2025, 3, 31))
    long_day = occurrences("0 * * * *", BERLIN, local(BERLIN, 2025, 10, 26), local(BERLIN, 2025, 10, 27))
    assert len(short_day) == 23
    assert len(long_day) == 25
    assert "2025-10-26T02:00:00+01:00" in long_day
    assert "2025-10-26T02:00:00+02:00" in long_day


def test_next_run_is_strictly_after() -> None:
    nine = local("UTC", 2030, 1, 1, 9)
    assert Scheduler.next_run("0 9 * * *", "UTC", nine) == nine + 86400
    assert Scheduler.next_run("0 9 * * *", "UTC", nine - 0.5) == nine


@pytest.mark.parametrize(
    ("expr", "hint"),
    [
        ("* * * * * *", "6 field(s)"),
        ("0 0 9 * * * 2030", "7 field(s)"),
        ("@daily", "1 field(s)"),
        ("61 * * * *", "not valid"),
        ("0 9 * * funday", "not valid"),
        ("H 9 * * *", "not valid"),
        ("0 0 31 2 *", "never matches"),
        ("", "0 field(s)"),
    ],
)
def test_bad_cron_is_rejected_with_a_hint(expr: str, hint: str) -> None:
    with pytest.raises(ScheduleError) as err:
        validate_cron(expr)
    assert hint in str(err.value)
    assert "minute hour day-of-month month day-of-week" in str(err.value)


def test_good_cron_is_normalized() -> None:
    assert validate_cron("  0  9 * *   1-5 ") == "0 9 * * 1-5"
    assert validate_cron("0 9 L * *") == "0 9 L * *"


def test_unknown_timezone_is_rejected() -> None:
    with pytest.raises(ScheduleError, match="unknown timezone 'Mars/Olympus'"):
        Scheduler.next_run("0 9 * * *", "Mars/Olympus", 0)


def test_run_at_parsing() -> None:
    assert parse_run_at("2030-01-31T09:00", BERLIN) == local(BERLIN, 2030, 1, 31, 9)
    assert parse_run_at("2030-01-31T09:00:00+05:00", BERLIN) == local("Etc/GMT-5", 2030, 1, 31, 9)
    assert parse_run_at("2030-01-31T09:00:00Z", BERLIN) == local("UTC", 2030, 1, 31, 9)
    with pytest.raises(ScheduleError, match="does not exist in Europe/Berlin"):
        parse_run_at("2025-03-30T02:30", BERLIN)
    with pytest.raises(ScheduleError, match="not an ISO 8601 time"):
        parse_run_at("next tuesday", BERLIN)


def test_catch_up_after_days_of_a_minutely_cron_is_bounded() -> None:
    first_due = local("UTC", 2030, 1, 1)
    now = first_due + 3 * 86400 + 30
    started = time.monotonic()
    plan = plan_cron("* * * * *", "UTC", first_due, now, grace=600)
    assert time.monotonic() - started < 2
    assert plan.fire_at == now - 30
    assert plan.next_at == now + 30
    assert plan.skipped_is_lower_bound
    assert plan.skipped >= 1000
    assert plan.last_skipped_at == now - 90
    assert plan.skip_note() == f"missed at least {plan.skipped} runs while stopped"
