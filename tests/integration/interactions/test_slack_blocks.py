"""A question on Slack through a real turn: Bolt and slack-sdk against the Slack stand-in, over
Socket Mode and over HTTP. The prompt carries Block Kit buttons, a tap arrives as
``block_actions`` (in an ``interactive`` envelope, or as a signed ``payload=`` form post), is
acknowledged after its commit and resumes the turn; the buttons are replaced with
``chat.update``; a second tap is acknowledged and changes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.fakes.slack_api import FakeSlack
from tests.harness import provider_for, running_gateway, tool_results, write_config

ASK = Call("ask_question", {"question": "Which region?", "type": "choice", "choices": ["eu", "us"]})
DM = "D0TALON01"
USER = "U0HUMAN01"


def _respond(body: dict[str, Any]) -> Reply:
    results = tool_results(body)
    return Reply(text=f"result: {results[-1][1]}") if results else Reply(tool_calls=[ASK])


async def _until(check: Callable[[], Any], timeout: float = 30.0) -> Any:
    async with asyncio.timeout(timeout):
        while not (value := check()):
            await asyncio.sleep(0.02)
    return value


def _tap(slack: FakeSlack, ts: str, action_id: str, trigger: str) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "user": {"id": USER, "username": "alice", "name": "alice", "team_id": "T0FAKE"},
        "api_app_id": "A0FAKE",
        "token": "fake-verification-token",
        "container": {"type": "message", "message_ts": ts, "channel_id": DM, "is_ephemeral": False},
        "trigger_id": trigger,
        "team": {"id": "T0FAKE", "domain": "fake"},
        "channel": {"id": DM, "name": "directmessage"},
        "message": {"type": "message", "ts": ts, "text": "❓ Which region?"},
        "actions": [
            {"action_id": action_id, "block_id": "b", "type": "button", "value": "2", "action_ts": "1.2"}
        ],
    }


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_a_block_kit_tap_resumes_the_turn_and_a_second_tap_changes_nothing(
    tmp_path: Path, mode: str
) -> None:
    async with FakeSlack() as slack, FakeAnthropic(responder=_respond) as fake:
        channel = {
            "name": "sl",
            "type": "slack",
            "bot_token": slack.bot_token,
            "api_base_url": slack.base_url,
            "streaming": "off",  # about the prompt and its answer, not previews (those: test_streaming_order.py)
        }
        if mode == "socket":
            channel["app_token"] = slack.app_token
        else:
            channel.update(signing_secret=slack.signing_secret, http_port=0)
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            personas={"assistant": {"capabilities": ["chat.ask"]}},
            extra={"channels": [channel], "bindings": [{"channel": "sl", "persona": "assistant"}]},
        )
        async with running_gateway(config) as gw:
            if mode == "http":
                slack.events_url = gw.components.connectors["sl"].events_url
            await slack.inject_message(DM, "deploy", user=USER)
            [prompt] = await slack.wait_for_posted(DM, 1, timeout=30)
            actions = prompt.params["blocks"][1]["elements"]
            assert [a["text"]["text"] for a in actions] == ["eu", "us"]
            first = await slack.deliver(
                _tap(slack, prompt.ts, actions[1]["action_id"], "tr1"), kind="interactive"
            )
            posted = await slack.wait_for_posted(DM, 2, timeout=30)
            await _until(lambda: "actions" not in str(slack.posted(DM)[0].params.get("blocks")))
            second = await slack.deliver(
                _tap(slack, prompt.ts, actions[1]["action_id"], "tr2"), kind="interactive"
            )
            await _until(lambda: second.acked)
    assert first.acked
    assert posted[1].text == 'result: {"action": "answer", "content": {"value": "us"}}'
    assert slack.posted(DM)[0].text.endswith("✅ us — alice")
    assert len(slack.posted(DM)) == 2 and len(fake.requests) == 2
