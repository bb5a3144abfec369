"""OpenTelemetry as deployed: ``talon run`` with the Telegram stand-in, a model that delegates
to a child agent, and the OTLP/HTTP collector stand-in, each in a process of its own.

One chat message gives one trace holding its intake, the turn, every model call, the agent
tool call with the child inside it, and the reply's sends; no attribute carries the chat
text, the tool's arguments or its result unless ``traces.content`` is on. Log lines of the
turn name the trace id. The spans arrive because ``talon run`` flushes them on stop.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.deployed.support import (
    deployed_daemon,
    fake_process,
    get_json,
    log_failures,
    post_json,
    write_deployed_config,
)

pytestmark = pytest.mark.timeout(180)

SECRET = "marmalade-otter-77"


async def _conversation(tmp_path: Path, *, content: bool) -> tuple[list[dict[str, Any]], list[str], str]:
    """Run one delegated exchange; returns the collector's spans, what the chat got, the log."""
    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path, "--latency", "0.01:0.03") as bot_api,
        fake_process("tests.fakes.delegating_model", tmp_path) as model,
        fake_process("tests.fakes.otlp_collector", tmp_path) as collector,
    ):
        config = write_deployed_config(
            tmp_path,
            model_url=model.url,
            model_kind="anthropic",
            channels=[
                {
                    "name": "team-telegram",
                    "type": "telegram",
                    "token": bot_api.info["token"],
                    "api_base_url": bot_api.url,
                    "poll_timeout": 1,
                    "streaming": "off",
                }
            ],
            traces={"otlp_endpoint": collector.url, "content": content},
        )
        persona = tmp_path / "personas" / "assistant" / "persona.yaml"
        persona.write_text(persona.read_text() + "capabilities: [agent.dispatch]\n", encoding="utf-8")
        async with deployed_daemon(config) as daemon:
            text = f"please check {SECRET}"
            await post_json(
                f"{bot_api.url}/_fake/inject", {"messages": [{"chat_id": 501, "user_id": 501, "text": text}]}
            )
            async with asyncio.timeout(60):
                while not (sent := (await get_json(f"{bot_api.url}/_fake/sent")).get("501")):
                    await asyncio.sleep(0.1)
            assert await daemon.stop() == 0  # flushes the last spans
            log = daemon.log()
        spans = await get_json(f"{collector.url}/_fake/spans")
    return spans, sent, log


def _named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name]


async def test_one_message_is_one_trace_from_intake_to_send_with_no_content(tmp_path: Path) -> None:
    spans, sent, log = await _conversation(tmp_path, content=False)
    assert sent == [f"done: child read: please check {SECRET}"]
    (intake,) = _named(spans, "talon.intake")
    (turn,) = _named(spans, "talon.turn")
    (tool,) = _named(spans, "talon.tool")
    (child,) = _named(spans, "talon.child")
    models, sends = _named(spans, "talon.model"), _named(spans, "talon.send")
    assert len(models) == 3 and len(sends) == 1
    assert {s["trace_id"] for s in spans} == {intake["trace_id"]}, "every span is in the message's trace"
    assert turn["parent_span_id"] == intake["span_id"]
    assert tool["parent_span_id"] == turn["span_id"] and child["parent_span_id"] == tool["span_id"]
    assert [m for m in models if m["parent_span_id"] == child["span_id"]], (
        "the child's model call is inside it"
    )
    assert sends[0]["parent_span_id"] == turn["span_id"]
    assert intake["attributes"]["talon.channel"] == "team-telegram"
    assert intake["attributes"]["talon.outcome"] == "accepted"
    assert turn["attributes"]["talon.outcome"] == "completed"
    assert turn["attributes"]["talon.run_id"] == tool["attributes"]["talon.run_id"]
    assert child["attributes"]["talon.parent_run_id"] == turn["attributes"]["talon.run_id"]
    assert child["attributes"]["talon.input_tokens"] == 9
    assert tool["attributes"]["gen_ai.tool.name"] == "agent"
    assert sends[0]["attributes"]["talon.outcome"] == "sent" and sends[0]["attributes"]["talon.bytes"] > 0
    assert SECRET not in json.dumps(spans), "no message text, tool arguments or results in any span"
    traced = re.findall(r"trace_id=([0-9a-f]{32})", log)
    assert traced and set(traced) == {turn["trace_id"]}
    assert log_failures(log) == []


async def test_with_content_on_the_spans_carry_the_text_arguments_and_results(tmp_path: Path) -> None:
    spans, _, _ = await _conversation(tmp_path, content=True)
    (intake,) = _named(spans, "talon.intake")
    (tool,) = _named(spans, "talon.tool")
    (send,) = _named(spans, "talon.send")
    assert intake["attributes"]["talon.message.text"] == f"please check {SECRET}"
    assert json.loads(tool["attributes"]["talon.tool.arguments"]) == {
        "prompt": f"CHILD please check {SECRET}"
    }
    assert SECRET in tool["attributes"]["talon.tool.result"]
    assert send["attributes"]["talon.message.text"] == f"done: child read: please check {SECRET}"
