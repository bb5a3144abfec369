"""model_complete in real turns: the prompt, the system prompt and a workspace file reach the
second configured provider with no tools, its text and usage come back; an unconfigured model
is an error naming the configured providers and nothing is sent anywhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, say, tool_results, write_config


async def test_model_complete_asks_the_named_provider_without_tools(tmp_path: Path) -> None:
    steps = [
        Call(
            "model_complete",
            {
                "prompt": "Classify this report.",
                "system": "Answer with one word.",
                "model": "second:small-model",
                "max_tokens": 50,
                "input_path": "/workspace/report.txt",
            },
        ),
        Call("model_complete", {"prompt": "hi", "model": "cloud:big-model"}),
        Call("model_complete", {"prompt": "hi", "max_tokens": 40000}),
    ]

    def main(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if len(results) < len(steps):
            return Reply(tool_calls=[steps[len(results)]])
        return Reply(text=json.dumps(results))

    async with (
        FakeAnthropic(responder=main) as fake,
        FakeAnthropic(responder=lambda body: Reply(text="bug")) as second,
    ):
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            extra={"providers": {"fake": provider_for(fake), "second": provider_for(second)}},
            personas={"assistant": {"capabilities": ["model.complete", "fs.read:thread"]}},
        )
        async with running_gateway(config) as gw:
            first = await say(gw, "warm up")  # makes the thread and its workspace
            workspace = next((tmp_path / "data" / "workspaces" / "assistant" / "threads").iterdir())
            (workspace / "report.txt").write_text("The export button does nothing.", encoding="utf-8")
            fake.requests.clear()
            second.requests.clear()
            turn = await say(gw, "what kind of report is it?")
    assert first.status == "completed"
    (ok_error, ok_text), (unknown_error, unknown_text), (big_error, big_text) = json.loads(turn.text)
    assert ok_error is False
    answer = json.loads(ok_text)
    assert answer["text"] == "bug" and answer["model"] == "second:small-model"
    assert set(answer["usage"]) == {"input_tokens", "output_tokens"}
    assert "The export button" not in ok_text  # the file went to the model, not to the caller
    (request,) = second.requests
    assert request["model"] == "small-model" and request["max_tokens"] == 50
    assert "tools" not in request or not request["tools"]
    assert "Answer with one word." in json.dumps(request["system"])
    sent = json.dumps(request["messages"])
    assert "Classify this report." in sent and "The export button does nothing." in sent
    assert unknown_error is True and "'cloud:big-model' is not configured" in unknown_text
    assert "fake, second" in unknown_text
    assert big_error is True and "max_tokens" in big_text
