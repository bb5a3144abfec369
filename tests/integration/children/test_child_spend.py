"""A child agent's model calls are priced and count for its root turn's sender, persona and
channel: in the usage rollups the budgets read and in ``talon usage``; a spent budget refuses a
child before it makes a model call, and a background child's turns count for the root sender."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.store.usage import rollup_totals, usage_by
from gateway.usage import Periods
from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, say, tool_results, write_config
from tests.integration.children.support import calls_then, last_result, of, routed
from tests.store_helpers import fetch_row, fetch_rows

PRICES = {"fake:test-model": {"input": 3.0, "output": 15.0}}  # per million tokens


def config(tmp_path: Path, fake: FakeAnthropic, **extra: Any) -> Path:
    personas = {"assistant": {"capabilities": ["agent.dispatch", "jobs.manage"]}}
    extra = {"prices": PRICES, **extra}
    return write_config(tmp_path, provider=provider_for(fake), personas=personas, extra=extra)


async def _user_day(db: Any, sender: str) -> Any:
    (totals,) = await db.read(rollup_totals, [("user", sender, Periods.at(time.time(), "UTC").day)])
    return totals


async def test_a_foreground_childs_tokens_and_cost_count_for_the_root_sender(tmp_path: Path) -> None:
    fake = FakeAnthropic(
        responder=routed(
            go=lambda body: (
                Reply(text="done", input_tokens=100, output_tokens=10)
                if tool_results(body)
                else Reply(
                    tool_calls=[Call("agent", {"prompt": "CHILD count"})], input_tokens=100, output_tokens=10
                )
            ),
            CHILD=lambda body: Reply(text="3 files", input_tokens=20_000, output_tokens=1_000),
        )
    )
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        db = gw.components.db
        await say(gw, "go")
        child = await fetch_row(
            db, "SELECT r.sender_id, r.channel, r.cost FROM runs r JOIN child_runs c ON c.run_id = r.id"
        )
        root = await fetch_row(
            db, "SELECT sender_id FROM runs WHERE id NOT IN (SELECT run_id FROM child_runs)"
        )
        day = await _user_day(db, root["sender_id"])
        by_user = await db.read(usage_by, "user", since=0)

    assert root["sender_id"] is not None
    assert (child["sender_id"], child["channel"]) == (root["sender_id"], "console")
    # 20,000 in at 3.00 and 1,000 out at 15.00 per million.
    assert round(child["cost"], 6) == 0.075
    assert day.tokens == 21_000 + 220 and day.runs == 2  # the child's and the parent's
    assert round(day.cost, 6) == round(0.075 + (200 * 3.0 + 20 * 15.0) / 1e6, 6)
    ((row),) = by_user  # what `talon usage --by user` prints
    assert (row.key, row.runs, row.input_tokens, row.output_tokens) == (root["sender_id"], 2, 20_200, 1_020)


async def test_a_spent_daily_budget_refuses_the_next_child_before_its_model_call(tmp_path: Path) -> None:
    fake = FakeAnthropic(
        responder=routed(
            go=calls_then(
                Call("agent", {"prompt": "CHILD1 first"}),
                Call("agent", {"prompt": "CHILD2 second"}),
                final=last_result,
            ),
            CHILD1=lambda body: Reply(text="spent it", input_tokens=1_500, output_tokens=100),
            CHILD2=lambda body: Reply(text="never"),
        )
    )
    budgets = {"per_user_day": {"tokens": 1_000}}
    async with fake, running_gateway(config(tmp_path, fake, budgets=budgets)) as gw:
        turn = await say(gw, "go")
        children = await fetch_rows(gw.components.db, "SELECT run_id FROM child_runs")
    # The root turn began under the budget; its first child spent it; the second is refused.
    assert turn.text.startswith("ERROR ")
    assert "your daily budget of 1,000 tokens is used up today" in turn.text
    assert of(fake.requests, "CHILD2") == [] and len(of(fake.requests, "CHILD1")) == 1
    assert len(children) == 1


async def _wait(predicate: Callable[[], Any], timeout: float = 20) -> Any:
    async with asyncio.timeout(timeout):
        while not (value := await predicate()):
            await asyncio.sleep(0.02)
    return value


async def test_a_background_childs_turns_count_for_the_root_sender(tmp_path: Path) -> None:
    def parent(body: dict[str, Any]) -> Reply:
        if tool_results(body):
            return Reply(text="started")
        if "Background task" in json.dumps(body["messages"][-1]):
            return Reply(text="noted")
        return Reply(tool_calls=[Call("agent", {"prompt": "BG scan", "mode": "background"})])

    fake = FakeAnthropic(
        responder=routed(
            BG=lambda body: Reply(text="scanned", input_tokens=5_000, output_tokens=500), go=parent
        )
    )
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        db = gw.components.db
        await say(gw, "go")
        await _wait(
            lambda: fetch_row(db, "SELECT 1 FROM messages WHERE role = 'assistant' AND text = 'noted'")
        )
        job = await fetch_row(db, "SELECT payer FROM child_jobs")
        root = await fetch_row(
            db, "SELECT sender_id, input_tokens + output_tokens AS t FROM runs ORDER BY id LIMIT 1"
        )
        child = await fetch_row(
            db,
            "SELECT r.sender_id, r.channel, r.cost FROM runs r JOIN background_tasks b "
            "ON b.thread_id = r.thread_id",
        )
        day = await _user_day(db, root["sender_id"])

    assert json.loads(job["payer"]) == {
        "persona": "assistant",
        "channel": "console",
        "sender": root["sender_id"],
    }
    assert (child["sender_id"], child["channel"]) == (root["sender_id"], "console")
    assert round(child["cost"], 6) == round((5_000 * 3.0 + 500 * 15.0) / 1e6, 6)
    # The root turn and the child's turn; the posted result's turn has no sender.
    assert (day.tokens, day.runs) == (root["t"] + 5_500, 2)
