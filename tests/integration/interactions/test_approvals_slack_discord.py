"""Approval gates on Slack and Discord through real turns (Telegram's are in
test_telegram_buttons.py): an approval-gated state_put runs only after Approve, is refused
after Deny, and fails closed when nobody answers in time; the model sees each outcome and
the state document exists only after Approve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakes.discord_api import FakeDiscord
from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.fakes.slack_api import FakeSlack
from tests.harness import provider_for, running_gateway, tool_results, write_config
from tests.store_helpers import fetch_rows

PUT = Call("state_put", {"namespace": "ops", "key": "deploy", "value": {"go": True}})
PERSONA = {
    "capabilities": ["state.write:persona", "state.read:persona"],
    "approvals": {"tools": ["state_put"], "approvers": "asker", "timeout": 2},
}
DM = "D0TALON01"
USER = "U0HUMAN01"
OUTCOMES = {
    "Approve": '"version": 1',
    "Deny": "state_put was denied by the approver; it was not run",
    None: "state_put was not approved within 2 seconds; it was not run",
}


def _respond(body: dict[str, Any]) -> Reply:
    results = tool_results(body)
    return Reply(text=f"result: {results[-1][1]}") if results else Reply(tool_calls=[PUT])


def _config(tmp_path: Path, fake: FakeAnthropic, channel: dict[str, Any]) -> Path:
    return write_config(
        tmp_path,
        provider=provider_for(fake),
        personas={"assistant": PERSONA},
        extra={"channels": [channel], "bindings": [{"channel": channel["name"], "persona": "assistant"}]},
    )


def _slack_tap(ts: str, action_id: str) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "user": {"id": USER, "username": "alice", "name": "alice", "team_id": "T0FAKE"},
        "api_app_id": "A0FAKE",
        "token": "fake-verification-token",
        "container": {"type": "message", "message_ts": ts, "channel_id": DM, "is_ephemeral": False},
        "trigger_id": "tr1",
        "team": {"id": "T0FAKE", "domain": "fake"},
        "channel": {"id": DM, "name": "directmessage"},
        "message": {"type": "message", "ts": ts, "text": "approval"},
        "actions": [
            {"action_id": action_id, "block_id": "b", "type": "button", "value": "x", "action_ts": "1.2"}
        ],
    }


async def _documents(gw: Any) -> list[Any]:
    return await fetch_rows(gw.components.db, "SELECT value FROM state_documents")


@pytest.mark.parametrize("tap", ["Approve", "Deny", None], ids=["approved", "denied", "timed-out"])
async def test_slack_approval(tmp_path: Path, tap: str | None) -> None:
    async with FakeSlack() as slack, FakeAnthropic(responder=_respond) as fake:
        channel = {
            "name": "sl",
            "type": "slack",
            "bot_token": slack.bot_token,
            "app_token": slack.app_token,
            "api_base_url": slack.base_url,
            "streaming": "off",  # about the prompt and its answer, not previews (those: test_streaming_order.py)
        }
        async with running_gateway(_config(tmp_path, fake, channel)) as gw:
            await slack.inject_message(DM, "deploy", user=USER)
            [request] = await slack.wait_for_posted(DM, 1, timeout=30)
            buttons = [
                e for b in request.params["blocks"] if b.get("type") == "actions" for e in b["elements"]
            ]
            assert [b["text"]["text"] for b in buttons] == ["Approve", "Deny", "Always in this thread"]
            assert "state_put" in request.text
            if tap is not None:
                (chosen,) = [b for b in buttons if b["text"]["text"] == tap]
                await slack.deliver(_slack_tap(request.ts, chosen["action_id"]), kind="interactive")
            posted = await slack.wait_for_posted(DM, 2, timeout=30)
            documents = await _documents(gw)
    assert OUTCOMES[tap] in posted[1].text
    assert len(documents) == (1 if tap == "Approve" else 0)
    assert len(fake.requests) == 2


@pytest.mark.parametrize("tap", ["Approve", "Deny", None], ids=["approved", "denied", "timed-out"])
async def test_discord_approval(tmp_path: Path, tap: str | None) -> None:
    async with FakeDiscord() as discord, FakeAnthropic(responder=_respond) as fake:
        channel = {
            "name": "dc",
            "type": "discord",
            "token": discord.token,
            "api_base_url": discord.api_base_url,
            "gateway_url": discord.gateway_url,
            "streaming": "off",  # about the prompt and its answer, not previews (those: test_streaming_order.py)
        }
        dm = discord.dm_channel_id
        async with running_gateway(_config(tmp_path, fake, channel)) as gw:
            await discord.wait_for_ready()
            discord.inject_message(dm, "deploy", author_id=discord.user_id, guild=False)
            [request] = await discord.wait_for_sent(dm, 1, timeout=30)
            buttons = [c for row in request["components"] for c in row["components"]]
            assert [b["label"] for b in buttons] == ["Approve", "Deny", "Always in this thread"]
            if tap is not None:
                (chosen,) = [b for b in buttons if b["label"] == tap]
                discord.interactions.tap(request["id"], chosen["custom_id"], user_id=discord.user_id)
            sent = await discord.wait_for_sent(dm, 2, timeout=30)
            documents = await _documents(gw)
    assert OUTCOMES[tap] in sent[1]["content"]
    assert len(documents) == (1 if tap == "Approve" else 0)
    assert len(fake.requests) == 2
