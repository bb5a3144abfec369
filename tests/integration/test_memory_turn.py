"""Scoped memory in real turns, through a Telegram group (the fake Bot API) and the agent loop
with the fake model issuing memory_update and memory_search: what one member keeps as
their own (a user fact, a user hot block) never reaches a turn answering another member,
while the persona's hot memory reaches everyone's; the next turn's system prompt carries the
hot memory; and all of it is there again after the gateway restarts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.memory_scopes import HOT_HEADING
from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.harness import provider_for, running_gateway, tool_results, write_config

CHANNEL = "team-telegram"
GROUP = -1001234567890
ANN, BOB = 101, 202
REMEMBER = [
    Call(
        "memory_update",
        {
            "target": "fact",
            "action": "set",
            "category": "preference",
            "content": "Ann's partner is called Sam",
        },
    ),
    Call("memory_update", {"target": "hot", "action": "set", "content": "Ann takes her coffee black"}),
    Call(
        "memory_update",
        {"target": "hot", "action": "set", "scope": "persona", "content": "Standup is at 9:30 every day"},
    ),
]
RECALL = Call("memory_search", {"query": "partner OR sam OR coffee"})


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def _asked(body: dict[str, Any]) -> str:
    """The newest user text of the request (the message this turn answers)."""
    for message in reversed(body["messages"]):
        text = _text(message["content"]) if message["role"] == "user" else ""
        if text.strip():
            return text
    return ""


def _respond(body: dict[str, Any]) -> Reply:
    results = tool_results(body)
    calls = REMEMBER if "remember" in _asked(body).split("\n")[-1] else [RECALL]
    if len(results) < len(calls):
        return Reply(tool_calls=[calls[len(results)]])
    return Reply(text=json.dumps(results))


def _turns(model: FakeAnthropic) -> list[tuple[str, str, list[tuple[bool, str]]]]:
    """(system prompt, asked, tool results) of each turn's last model request."""
    out = []
    for body in model.requests:
        results = tool_results(body)
        asked = _asked(body)
        expected = len(REMEMBER) if "remember" in asked.split("\n")[-1] else 1
        if len(results) == expected:
            out.append((_text(body.get("system", "")), asked, results))
    return out


def _config(tmp_path: Path, telegram: FakeTelegramAPI, model: FakeAnthropic) -> Path:
    channel = {
        "name": CHANNEL,
        "type": "telegram",
        "token": telegram.token,
        "api_base_url": telegram.url,
        "pacing": {"per_second": 0, "per_chat_per_second": 0, "group_per_minute": 0},
    }
    return write_config(
        tmp_path,
        provider=provider_for(model),
        extra={"channels": [channel], "bindings": [{"channel": CHANNEL, "persona": "assistant"}]},
        personas={"assistant": {"capabilities": ["memory.access:persona"]}},
    )


def _say(telegram: FakeTelegramAPI, user: int, text: str) -> None:
    telegram.inject_message(GROUP, f"@talon_test_bot {text}", user_id=user, chat_type="supergroup")


async def test_a_members_own_memory_stays_theirs_and_survives_a_restart(tmp_path: Path) -> None:
    async with FakeTelegramAPI() as telegram, FakeAnthropic(responder=_respond) as model:
        config = _config(tmp_path, telegram, model)
        async with running_gateway(config):
            _say(telegram, ANN, "please remember this")
            await telegram.wait_for_sent(GROUP, 1, timeout=30)
            _say(telegram, BOB, "what do you know about me")
            await telegram.wait_for_sent(GROUP, 2, timeout=30)
            _say(telegram, ANN, "what do you know about me")
            await telegram.wait_for_sent(GROUP, 3, timeout=30)
        async with running_gateway(config):
            _say(telegram, ANN, "what do you know about me, after the restart")
            await telegram.wait_for_sent(GROUP, 4, timeout=30)
        turns = _turns(model)

    assert len(turns) == 4
    (first_system, _, wrote), (bob_system, _, bob_found), (ann_system, _, ann_found), after = turns
    assert [is_error for is_error, _ in wrote] == [False, False, False]
    assert [json.loads(text)["scope"] for _, text in wrote] == ["user", "user", "persona"]
    assert HOT_HEADING not in first_system  # nothing was kept before the first turn

    # Bob's turn: the persona's hot memory, none of Ann's memory, and no search hit of hers.
    assert "Standup is at 9:30 every day" in bob_system
    assert "coffee" not in bob_system
    assert json.loads(bob_found[0][1])["results"] == []

    # Ann's turns, before and after the restart: her hot block and her fact.
    for system, results in ((ann_system, ann_found), (after[0], after[2])):
        assert "Ann takes her coffee black" in system and "Standup is at 9:30 every day" in system
        found = json.loads(results[0][1])["results"]
        assert [(r["content"], r["scope"], r["category"]) for r in found] == [
            ("Ann's partner is called Sam", "user", "preference")
        ]
