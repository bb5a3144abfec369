"""/usage on the console: this conversation's and this sender's tokens and cost, priced at
the price table's prices when each run ended, with what is left of the daily budget."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from connectors.base import IntakeStatus
from tests.fakes.model_api import FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, say, write_config
from tests.store_helpers import fetch_rows


async def test_usage_shows_tokens_and_cost_and_the_budget_left(tmp_path: Path) -> None:
    def answer(body: dict[str, Any]) -> Reply:
        return Reply(text="ok", input_tokens=1_000, output_tokens=500)

    async with FakeAnthropic(responder=answer) as fake:
        extra = {
            "prices": {"fake:test-model": {"input": 3.0, "output": 15.0}},
            "currency": "EUR",
            "budgets": {"per_user_day": {"tokens": 100_000}},
        }
        config = write_config(tmp_path, provider=provider_for(fake), extra=extra)
        async with running_gateway(config) as gw:
            await say(gw, "one")
            await say(gw, "two")
            console = gw.components.control.console(None)
            inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
            with console.attach("main", inbox):
                result = await console.submit("main", "/usage")
                async with asyncio.timeout(10):
                    item = await inbox.get()
                    while item["type"] != "message":
                        item = await inbox.get()
            runs = await fetch_rows(gw.components.db, "SELECT cost, currency FROM runs ORDER BY id")

    # 1,000 in at 3.00 and 500 out at 15.00 per million: 0.0105 per run.
    assert [(round(r["cost"], 6), r["currency"]) for r in runs] == [(0.0105, "EUR")] * 2
    assert result.status is IntakeStatus.STORED and len(fake.requests) == 2  # /usage is no turn
    text = item["text"]
    assert "this conversation today" in text and "3,000 tokens, 0.02 EUR" in text
    assert "you today" in text
    assert "97,000 tokens left of 100,000 tokens" in text
