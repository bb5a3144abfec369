"""view_image and wait_for in real turns: the fake model views an image and receives it as image
content in the Anthropic and in the OpenAI wire format (or as text for a text-only model), and a
wait ends early when the user writes again in the thread."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from gateway.daemon import Gateway
from gateway.sandbox import sandbox_problem
from gateway.store.threads import upsert_thread
from tests.fakes.model_api import Call, FakeAnthropic, FakeOpenAI, Reply
from tests.harness import provider_for, running_gateway, say, write_config
from tools.workspace.roots import thread_workspace

LABELS = ["fs.read:thread", "fs.write:thread", "shell.exec:sandbox"]


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (20, 120, 220)).save(out, "PNG")
    return out.getvalue()


def _answered(body: dict[str, Any]) -> bool:
    """Whether the request already carries a tool result (either wire format)."""
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            return True
        content = message.get("content")
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            return True
    return False


async def _put_in_workspace(gw: Gateway, name: str, data: bytes) -> None:
    """Write a file into the console thread main's /workspace before its turn."""
    console = gw.components.control.console(None)
    assert console is not None
    row = await gw.components.db.run_transaction(
        upsert_thread, console.thread_key("main"), chat_type="dm", persona="assistant", now=time.time()
    )
    folder = thread_workspace(gw.settings, "assistant", row.id)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


async def _view_turn(tmp_path: Path, fake: FakeAnthropic | FakeOpenAI, provider: dict[str, Any]) -> str:
    fake.responder = lambda body: (
        Reply(text="a blue rectangle")
        if _answered(body)
        else Reply(tool_calls=[Call("view_image", {"file_path": "/workspace/chart.png"})])
    )
    config = write_config(tmp_path, provider=provider, personas={"assistant": {"capabilities": LABELS}})
    async with running_gateway(config) as gw:
        await _put_in_workspace(gw, "chart.png", _png())
        turn = await say(gw, "what is in chart.png?", timeout=60)
    return turn.text


async def test_anthropic_receives_the_image_inside_the_tool_result(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        text = await _view_turn(tmp_path, fake, provider_for(fake))
        last = fake.requests[1]["messages"][-1]
    assert text == "a blue rectangle"
    [result] = [b for b in last["content"] if b["type"] == "tool_result"]
    words, image = result["content"]
    assert json.loads(words["text"]) == {
        "path": "/workspace/chart.png",
        "type": "image/png",
        "size": len(_png()),
        "width": 64,
        "height": 48,
    }
    assert image == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(_png()).decode()},
    }


async def test_openai_receives_the_image_as_a_user_message_after_the_tool_message(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake:
        text = await _view_turn(tmp_path, fake, provider_for(fake, "openai"))
        messages = fake.requests[1]["messages"]
    assert text == "a blue rectangle"
    tool, user = messages[-2], messages[-1]
    assert tool["role"] == "tool" and json.loads(tool["content"])["width"] == 64
    assert user["role"] == "user"
    intro, picture = user["content"]
    assert intro == {"type": "text", "text": f"The image(s) returned by tool call {tool['tool_call_id']}:"}
    assert picture == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(_png()).decode()},
    }


@pytest.mark.parametrize("setting", [{"images": False}, {"text_only_models": ["test-model"]}])
async def test_a_text_only_model_gets_the_metadata_alone(tmp_path: Path, setting: dict[str, Any]) -> None:
    async with FakeOpenAI() as fake:
        text = await _view_turn(tmp_path, fake, {**provider_for(fake, "openai"), **setting})
        messages = fake.requests[1]["messages"]
    assert text == "a blue rectangle"
    assert messages[-1]["role"] == "tool"
    metadata, note = messages[-1]["content"].split("\n")
    assert json.loads(metadata)["height"] == 48
    assert note.startswith("[1 image(s) not shown: this model takes no images")
    assert "image_url" not in json.dumps(messages)


@pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}")
async def test_a_new_message_ends_a_wait_and_gets_its_own_turn(tmp_path: Path) -> None:
    def respond(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        blocks = last["content"] if isinstance(last["content"], list) else []
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if results:
            status = json.loads(results[0]["content"])["status"]
            return Reply(text=f"stopped waiting: {status}")
        if "second" in json.dumps(last):
            return Reply(text="heard your second message")
        wait = {"type": "file", "path": "build/done", "timeout_ms": 600_000, "poll_interval_ms": 60_000}
        return Reply(tool_calls=[Call("wait_for", wait)])

    async with FakeAnthropic(responder=respond) as fake:
        config = write_config(
            tmp_path, provider=provider_for(fake), personas={"assistant": {"capabilities": LABELS}}
        )
        async with running_gateway(config) as gw:
            first = asyncio.create_task(say(gw, "tell me when the build is done", timeout=60))
            for _ in range(400):
                if fake.requests:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # the wait is running
            second = await say(gw, "second message: never mind", timeout=60)
            turn = await first
        [result] = [b for b in fake.requests[1]["messages"][-1]["content"] if b.get("type") == "tool_result"]
    waited = json.loads(result["content"])
    assert turn.text == "stopped waiting: yielded_to_user"
    assert waited["status"] == "yielded_to_user" and waited["elapsed_ms"] < 60_000
    assert second.text == "heard your second message"
