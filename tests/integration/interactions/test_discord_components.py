"""A question on Discord through a real turn: discord.py against the Discord stand-in. The prompt
carries buttons, a tap (INTERACTION_CREATE type 3) is acknowledged with a deferred update and
resumes the turn, the buttons are removed, and a second tap is told "Already answered."."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fakes.discord_api import FakeDiscord
from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, tool_results, write_config

ASK = Call("ask_question", {"question": "Which region?", "type": "choice", "choices": ["eu", "us"]})


def _respond(body: dict[str, Any]) -> Reply:
    results = tool_results(body)
    return Reply(text=f"result: {results[-1][1]}") if results else Reply(tool_calls=[ASK])


async def _until(check: Callable[[], Any], timeout: float = 30.0) -> Any:
    async with asyncio.timeout(timeout):
        while not (value := check()):
            await asyncio.sleep(0.02)
    return value


async def test_a_button_tap_resumes_the_turn_and_a_second_tap_is_refused(tmp_path: Path) -> None:
    async with FakeDiscord() as discord, FakeAnthropic(responder=_respond) as fake:
        channel = {
            "name": "dc",
            "type": "discord",
            "token": discord.token,
            "api_base_url": discord.api_base_url,
            "gateway_url": discord.gateway_url,
            "streaming": "off",  # about the prompt and its answer, not previews (those: test_streaming_order.py)
        }
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            personas={"assistant": {"capabilities": ["chat.ask"]}},
            extra={"channels": [channel], "bindings": [{"channel": "dc", "persona": "assistant"}]},
        )
        dm = discord.dm_channel_id
        async with running_gateway(config):
            await discord.wait_for_ready()
            discord.inject_message(dm, "deploy", author_id=discord.user_id, guild=False)
            [prompt] = await discord.wait_for_sent(dm, 1, timeout=30)
            [row] = prompt["components"]
            assert [b["label"] for b in row["components"]] == ["eu", "us"]
            us = row["components"][1]["custom_id"]
            first = discord.interactions.tap(prompt["id"], us, user_id=discord.user_id)
            sent = await discord.wait_for_sent(dm, 2, timeout=30)
            await _until(lambda: discord.sent(dm)[0]["components"] == [])
            second = discord.interactions.tap(prompt["id"], us, user_id=discord.user_id)
            await _until(lambda: second.followups)
    assert sent[1]["content"] == 'result: {"action": "answer", "content": {"value": "us"}}'
    assert [c["type"] for c in first.callbacks] == [6] and [c["type"] for c in second.callbacks] == [6]
    assert discord.sent(dm)[0]["content"].endswith("✅ us — Alice")
    notice = discord.sent(dm)[-1]
    assert notice["content"] == "Already answered." and notice["flags"] == 64
    assert len(fake.requests) == 2
