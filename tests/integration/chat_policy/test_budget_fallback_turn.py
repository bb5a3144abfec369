"""Spending budgets and model fallback in a group on each platform.

A member whose daily budget is spent is refused politely, with no model call, while the
message stays stored and another member is still answered; the operator's chat hears once
when the budget passes 80%. A persona with a fallback model answers through it after a
scripted 529, records which model answered, and never falls back after a 401."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_api import Error, FakeAnthropic, Reply
from tests.integration.chat_policy.groups import CHANNEL, PLATFORMS, group_gateway, group_on
from tests.store_helpers import fetch_rows

TOKENS_PER_TURN = 800  # 600 in, 200 out


def _answer(body: dict[str, Any]) -> Reply:
    return Reply(text="answered", input_tokens=600, output_tokens=200)


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_a_spent_daily_budget_refuses_politely_and_the_operator_hears_at_80(
    tmp_path: Path, platform: str
) -> None:
    async with group_on(platform) as group, FakeAnthropic(responder=_answer) as model:
        ann, bob = group.users
        extra = {
            "budgets": {"per_user_day": {"tokens": 1000}},
            "operator": {"channel": CHANNEL, "chat": group.operator_chat()},
        }
        async with group_gateway(tmp_path, group, model, extra=extra) as gateway:
            await group.say(ann, "first question")  # 800 of 1000: the 80% notice
            await group.replies(1)
            notices = await group.operator_notices(1)
            await group.say(ann, "second question")  # under the budget when it starts: answered
            await group.replies(2)
            await group.say(ann, "third question")  # 1600 of 1000: refused
            refused = (await group.replies(3))[2]
            await group.say(bob, "my question")  # another member's budget is untouched
            replies = await group.replies(4)
            stored = await fetch_rows(
                gateway.components.db, "SELECT text FROM messages WHERE role = 'user' ORDER BY id"
            )
            runs = await fetch_rows(gateway.components.db, "SELECT status, sender_id FROM runs ORDER BY id")

    assert len(model.requests) == 3  # the refused turn made no model call
    assert "daily budget" in refused.text and "1,000 tokens" in refused.text and "saved" in refused.text
    assert replies[3].text == "answered"
    assert any("third question" in row["text"] for row in stored)  # nothing lost
    assert [r["status"] for r in runs if r["status"] != "completed"] == ["refused"]
    assert len(notices) == 1 and "per_user_day" in notices[0] and "80%" in notices[0]
    # Once per member and day: Ann's second and third turns added none; Bob's first turn his own.
    later = await group.operator_notices(2)
    assert later[0] == notices[0] and f"for {bob} " in later[1] and len(later) == 2


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_a_529_falls_back_to_the_next_model_and_a_401_never_does(tmp_path: Path, platform: str) -> None:
    async with group_on(platform) as group, FakeAnthropic(responder=_answer) as model:
        ann, _ = group.users
        personas = {"assistant": {"model": ["fake:big-model", "fake:small-model"]}}
        async with group_gateway(tmp_path, group, model, personas=personas) as gateway:
            model.script(Error(529))
            await group.say(ann, "are you there")
            first = await group.replies(1)
            model.script(Error(401, message="invalid x-api-key"))
            await group.say(ann, "and now")
            second = await group.replies(2)
            runs = await fetch_rows(
                gateway.components.db, "SELECT status, model, fallbacks FROM runs ORDER BY id"
            )

    assert [body["model"] for body in model.requests] == ["big-model", "small-model", "big-model"]
    assert first[0].text == "answered"
    assert (runs[0]["status"], runs[0]["model"], runs[0]["fallbacks"]) == ("completed", "fake:small-model", 1)
    assert runs[1]["status"] == "failed" and runs[1]["fallbacks"] == 0
    assert "answered" not in second[1].text  # the user is told the turn failed; no other model hid it
