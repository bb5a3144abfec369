"""Prices, periods and spending budgets: what a run costs, where a day and month begin, which
budget refuses a turn, and the words the user and the operator read."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from connectors.base import ThreadKey
from gateway.config import Settings
from gateway.runtime.model import Usage
from gateway.spending import Spending
from gateway.store.db import open_database
from gateway.store.runs import RunSpend, complete_run, start_run
from gateway.store.threads import upsert_thread
from gateway.usage import Periods, cost_of
from gateway.usage_settings import Price, SpendLimit


def test_cost_prices_fresh_input_cache_and_output_apart() -> None:
    price = Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    usage = Usage(
        input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=400_000, cache_write_tokens=100_000
    )
    # 500k fresh at 3, 400k read at 0.3, 100k written at 3.75, 100k out at 15.
    assert cost_of(usage, price) == pytest.approx(1.5 + 0.12 + 0.375 + 1.5)
    assert cost_of(usage, Price(input=1.0)) == pytest.approx(1.0)  # cache priced as input by default
    assert cost_of(usage, None) is None


def test_periods_begin_at_local_midnight_and_the_first_of_the_month() -> None:
    now = datetime(2026, 12, 15, 1, 30, tzinfo=ZoneInfo("UTC")).timestamp()
    berlin = Periods.at(now, "Europe/Berlin")
    assert (berlin.day, berlin.month) == ("2026-12-15", "2026-12")
    assert berlin.day_start == datetime(2026, 12, 15, tzinfo=ZoneInfo("Europe/Berlin")).timestamp()
    assert Periods.at(now, "America/New_York").day == "2026-12-14"  # still yesterday there
    assert berlin.month_start == datetime(2026, 12, 1, tzinfo=ZoneInfo("Europe/Berlin")).timestamp()


def test_a_budget_is_tokens_or_cost_never_both_nor_neither() -> None:
    assert SpendLimit(tokens=10).tokens == 10
    for bad in ({}, {"tokens": 10, "cost": 1.0}):
        with pytest.raises(ValidationError, match="either tokens"):
            SpendLimit(**bad)
    with pytest.raises(ValidationError):
        Settings.model_validate({"budgets": {"per_user_week": {"tokens": 5}}})


async def test_the_first_spent_budget_refuses_and_says_when_it_renews(tmp_path: Path) -> None:
    settings = Settings.model_validate(
        {
            "currency": "EUR",
            "budgets": {"per_user_day": {"tokens": 1_000}, "per_persona_month": {"cost": 2.0}},
        }
    )
    db = await open_database(tmp_path / "talon.db")
    try:
        now = 1_800_000_000.0
        periods = Periods.at(now, settings.timezone)

        def spend(conn, sender: str, tokens: int, cost: float) -> None:  # type: ignore[no-untyped-def]
            thread = upsert_thread(conn, ThreadKey("tg", "g"), chat_type="group", persona="p", now=now)
            run = start_run(conn, thread.id, "p", "fake:m", now)
            complete_run(
                conn,
                run,
                model="fake:m",
                input_tokens=tokens,
                output_tokens=0,
                model_calls=1,
                now=now,
                spend=RunSpend(
                    cost=cost,
                    currency="EUR",
                    sender_id=sender,
                    channel="tg",
                    persona="p",
                    periods=(periods.day, periods.month),
                ),
            )

        spending = Spending(db, settings, clock=lambda: now + 10)
        await db.run_transaction(spend, "ann", 900, 0.5)
        assert await spending.check("p", "tg", ["ann"]) is None
        await db.run_transaction(spend, "ann", 100, 0.5)
        spent = await spending.check("p", "tg", ["ann", "bob"])
        assert spent is not None and (spent.budget, spent.subject) == ("per_user_day", "ann")
        assert "daily budget of 1,000 tokens" in spent.refusal("EUR") and "tomorrow" in spent.refusal("EUR")
        assert await spending.check("p", "tg", ["bob"]) is None
        await db.run_transaction(spend, "bob", 10, 1.0)
        by_persona = await spending.check("p", "tg", ["bob"])
        assert by_persona is not None and by_persona.budget == "per_persona_month"
        assert "2.00 EUR" in by_persona.refusal("EUR") and "next month" in by_persona.refusal("EUR")
        assert "100%" in by_persona.notice("EUR")
    finally:
        await db.close()


async def test_no_budget_reads_nothing(tmp_path: Path) -> None:
    class NoDatabase:
        async def read(self, *args: object) -> None:
            raise AssertionError("no budget is configured: nothing is read")

    spending = Spending(NoDatabase(), Settings())  # type: ignore[arg-type]
    assert await spending.check("p", "tg", ["ann"]) is None
    await spending.after_turn("p", "tg", ["ann"])


def test_the_operator_channel_must_be_configured(tmp_path: Path) -> None:
    from gateway.config import ConfigError, load_settings

    (tmp_path / "talon.yaml").write_text(
        "channels: [{name: console, type: console}]\noperator: {channel: consol}\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError) as raised:
        load_settings(tmp_path / "talon.yaml")
    assert "operator.channel: no channel named 'consol'; did you mean 'console'?" in str(raised.value)
