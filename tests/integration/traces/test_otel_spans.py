"""OpenTelemetry spans of real turns, received by the OTLP/HTTP collector stand-in: one trace
from intake to send, a foreground child inside the tool call that started it, a background
child's turn in its starter's trace, and no content unless ``traces.content`` is on."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway import otel
from gateway.logs import ContextFilter
from gateway.traces_settings import TracesSettings
from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.fakes.model_script import last_user_text
from tests.fakes.otlp_collector import OtlpCollector
from tests.harness import provider_for, running_gateway, say, tool_results, write_config
from tests.integration.children.support import first_user

SECRET = "zebra-umbrella-42"  # in the chat text, the tool arguments, the child's answer and the reply


def _route(body: dict[str, Any]) -> Reply:
    if first_user(body).startswith("CHILD"):
        return Reply(text=f"child found {SECRET}", input_tokens=7, output_tokens=3)
    results = tool_results(body)
    if results:
        return Reply(text=f"done: {results[-1][1][:60]}")
    if last_user_text(body).startswith("bg"):
        return Reply(tool_calls=[Call("agent", {"prompt": f"CHILD look for {SECRET}", "mode": "background"})])
    if "Background task" in last_user_text(body):
        return Reply(text="noted")
    return Reply(tool_calls=[Call("agent", {"prompt": f"CHILD look for {SECRET}"})])


@pytest.fixture
async def collector() -> AsyncIterator[OtlpCollector]:
    async with OtlpCollector() as found:
        yield found
    otel.uninstall()


async def _spans(collector: OtlpCollector, names: set[str], timeout: float = 20) -> list[dict[str, Any]]:
    await otel.shutdown()  # flushes the batch processor
    async with asyncio.timeout(timeout):
        while not names <= {s["name"] for s in collector.spans}:
            await asyncio.sleep(0.05)
    return collector.spans


def _config(tmp_path: Path, fake: FakeAnthropic) -> Path:
    personas = {"assistant": {"capabilities": ["agent.dispatch", "jobs.manage"]}}
    return write_config(tmp_path, provider=provider_for(fake), personas=personas)


class _Lines(logging.Handler):
    """Keeps the records it is given, after its filters (the daemon's ContextFilter) ran."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _by_name(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name]


async def test_one_trace_from_intake_to_send_with_the_child_inside_its_tool_call_and_no_content(
    tmp_path: Path, collector: OtlpCollector
) -> None:
    otel.install(TracesSettings(otlp_endpoint=collector.url, service_name="talon-test"))
    fake = FakeAnthropic(responder=_route)
    lines = _Lines()
    lines.addFilter(ContextFilter())
    talon_log = logging.getLogger("talon")
    level, talon_log.level = talon_log.level, logging.INFO
    talon_log.addHandler(lines)
    try:
        async with fake, running_gateway(_config(tmp_path, fake)) as gw:
            turn = await say(gw, f"please find {SECRET}")
    finally:
        talon_log.removeHandler(lines)
        talon_log.setLevel(level)
    assert SECRET in turn.text
    spans = await _spans(collector, {"talon.intake", "talon.turn", "talon.model", "talon.tool", "talon.send"})
    (intake,) = _by_name(spans, "talon.intake")
    (turn_span,) = _by_name(spans, "talon.turn")
    (tool,) = _by_name(spans, "talon.tool")
    (child,) = _by_name(spans, "talon.child")
    models = _by_name(spans, "talon.model")
    sends = _by_name(spans, "talon.send")
    assert {s["trace_id"] for s in spans} == {intake["trace_id"]}
    assert turn_span["parent_span_id"] == intake["span_id"]
    assert tool["parent_span_id"] == turn_span["span_id"]
    assert child["parent_span_id"] == tool["span_id"]
    assert len(models) == 3  # parent, child, parent again
    assert sorted(m["parent_span_id"] == child["span_id"] for m in models) == [False, False, True]
    assert all(s["parent_span_id"] == turn_span["span_id"] for s in sends) and sends
    assert all(s["service"] == "talon-test" for s in spans)
    assert turn_span["attributes"]["talon.outcome"] == "completed"
    assert turn_span["attributes"]["talon.persona"] == "assistant"
    assert turn_span["attributes"]["talon.input_tokens"] > 0
    assert tool["attributes"]["gen_ai.tool.name"] == "agent"
    assert tool["attributes"]["talon.decision"] == "allowed"
    assert child["attributes"]["talon.input_tokens"] == 7
    assert sends[0]["attributes"]["talon.outcome"] == "sent"
    assert intake["attributes"]["talon.text_bytes"] == len(f"please find {SECRET}")
    assert SECRET not in json.dumps(spans)
    # Log lines of work inside the turn carry its trace id.
    child_started = [r for r in lines.records if r.getMessage().startswith("child ")]
    assert [getattr(r, "trace_id", None) for r in child_started] == [turn_span["trace_id"]]


async def test_with_content_on_the_text_arguments_and_results_are_in_the_spans(
    tmp_path: Path, collector: OtlpCollector
) -> None:
    otel.install(TracesSettings(otlp_endpoint=collector.url, content=True))
    fake = FakeAnthropic(responder=_route)
    async with fake, running_gateway(_config(tmp_path, fake)) as gw:
        await say(gw, f"please find {SECRET}")
    spans = await _spans(collector, {"talon.intake", "talon.tool", "talon.send"})
    (intake,) = _by_name(spans, "talon.intake")
    (tool,) = _by_name(spans, "talon.tool")
    assert intake["attributes"]["talon.message.text"] == f"please find {SECRET}"
    assert SECRET in tool["attributes"]["talon.tool.arguments"]
    assert SECRET in tool["attributes"]["talon.tool.result"]
    assert any(SECRET in s["attributes"].get("talon.message.text", "") for s in _by_name(spans, "talon.send"))


async def test_a_background_childs_turn_continues_the_trace_of_the_tool_call_that_started_it(
    tmp_path: Path, collector: OtlpCollector
) -> None:
    otel.install(TracesSettings(otlp_endpoint=collector.url))
    fake = FakeAnthropic(responder=_route)
    async with fake, running_gateway(_config(tmp_path, fake)) as gw:
        await say(gw, "bg go")
        async with asyncio.timeout(20):
            while len([r for r in fake.requests if last_user_text(r).find("Background task") >= 0]) < 1:
                await asyncio.sleep(0.05)
        db = gw.components.db
        async with asyncio.timeout(10):
            while not await db.read(
                lambda c: c.execute("SELECT 1 FROM messages WHERE text = 'noted'").fetchone()
            ):
                await asyncio.sleep(0.05)
    spans = await _spans(collector, {"talon.turn", "talon.tool"})
    turns = _by_name(spans, "talon.turn")
    (tool,) = [s for s in _by_name(spans, "talon.tool") if s["attributes"]["gen_ai.tool.name"] == "agent"]
    background = [t for t in turns if t["parent_span_id"] == tool["span_id"]]
    assert len(background) == 1, turns
    assert background[0]["trace_id"] == tool["trace_id"]
    assert SECRET not in json.dumps(spans)


async def test_a_collector_that_is_down_costs_the_turn_nothing_and_logs_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with OtlpCollector() as closed:
        url = closed.url  # a port nobody listens on once it stops
    otel.install(TracesSettings(otlp_endpoint=url))
    fake = FakeAnthropic(responder=_route)
    try:
        async with fake, running_gateway(_config(tmp_path, fake)) as gw:
            with caplog.at_level(logging.WARNING, logger="talon.otel"):
                first = await say(gw, "one")
                second = await say(gw, "two")
                await otel.shutdown()
    finally:
        otel.uninstall()
    assert first.status == second.status == "completed"
    failures = [r for r in caplog.records if r.name == "talon.otel"]
    # One line, whether the exporter gave up before the stop or the stop's flush timed out first.
    assert len(failures) == 1 and "they are dropped" in failures[0].getMessage(), failures
