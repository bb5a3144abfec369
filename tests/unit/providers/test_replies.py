"""Replies, streaming, tool calls and usage through the real SDKs."""

from __future__ import annotations

import asyncio

import pytest

from gateway.runtime.model import ChatMessage, ModelRequest, ProviderError, ToolCall, ToolSpec, Usage
from tests.fakes.model_api import Call, Reply
from tests.unit.providers.conftest import Api

MEMORY = ToolSpec(
    name="memory_access",
    description="Read and write memory items.",
    input_schema={"type": "object", "properties": {"action": {"type": "string"}, "key": {"type": "string"}}},
)


def ask(text: str, *, tools: tuple[ToolSpec, ...] = (), **kwargs: object) -> ModelRequest:
    return ModelRequest(
        model="test-model",
        system="You are terse.",
        messages=(ChatMessage("user", text),),
        tools=tools,
        **kwargs,
    )


async def test_text_reply_with_usage(api: Api) -> None:
    api.fake.script(Reply(text="Hello, team.", input_tokens=42, output_tokens=7))

    response = await api.provider().complete(ask("hi"))

    assert response.text == "Hello, team."
    assert response.tool_calls == ()
    assert response.stop_reason == "end_turn"
    assert response.usage == Usage(input_tokens=42, output_tokens=7)


async def test_request_carries_model_system_and_limits(api: Api) -> None:
    await api.provider().complete(ask("hi", max_tokens=321))

    sent = api.fake.requests[0]
    assert sent["model"] == "test-model"
    assert sent["stream"] is True
    assert sent["max_tokens"] == 321
    if api.kind == "anthropic":
        assert sent["system"] == "You are terse."
    else:
        assert sent["messages"][0] == {"role": "system", "content": "You are terse."}
        assert sent["stream_options"] == {"include_usage": True}
    assert api.fake.headers[0]["authorization"] == "Bearer test-key"


async def test_streamed_deltas_reach_on_text_in_order(api: Api) -> None:
    api.fake.script(Reply(chunks=["Once ", "upon ", "a ", "time", "."]))
    seen: list[str] = []

    async def on_text(delta: str) -> None:
        seen.append(delta)

    response = await api.provider().complete(ask("story"), on_text)

    assert seen == ["Once ", "upon ", "a ", "time", "."]
    assert response.text == "Once upon a time."


async def test_deltas_arrive_before_the_call_returns(api: Api) -> None:
    api.fake.script(Reply(chunks=["first ", "second"], chunk_delay=0.1))
    first_seen = asyncio.Event()

    async def on_text(delta: str) -> None:
        first_seen.set()

    task = asyncio.create_task(api.provider().complete(ask("go"), on_text))
    await asyncio.wait_for(first_seen.wait(), 5)
    assert not task.done()
    assert (await task).text == "first second"


async def test_tool_call_round_trip(api: Api) -> None:
    api.fake.script(
        Reply(
            text="Checking.",
            tool_calls=[Call("memory_access", {"action": "get", "key": "team"}, id="call-1")],
        ),
        Reply(text="The team is blue."),
    )
    provider = api.provider()

    first = await provider.complete(ask("which team?", tools=(MEMORY,)))

    assert first.text == "Checking."
    assert first.tool_calls == (ToolCall("call-1", "memory_access", {"action": "get", "key": "team"}),)
    assert first.stop_reason == "tool_use"

    transcript = (
        ChatMessage("user", "which team?"),
        ChatMessage("assistant", first.text, tool_calls=first.tool_calls),
        ChatMessage("tool", "blue", tool_call_id="call-1"),
    )
    second = await provider.complete(ModelRequest("test-model", "sys", transcript, tools=(MEMORY,)))

    assert second.text == "The team is blue."
    sent = api.fake.requests[1]["messages"]
    if api.kind == "anthropic":
        assert api.fake.requests[1]["tools"] == [
            {"name": "memory_access", "description": MEMORY.description, "input_schema": MEMORY.input_schema}
        ]
        assert sent[1] == {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "call-1",
                    "name": "memory_access",
                    "input": {"action": "get", "key": "team"},
                },
            ],
        }
        assert sent[2] == {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call-1", "content": "blue"}],
        }
    else:
        assert api.fake.requests[1]["tools"][0]["function"]["name"] == "memory_access"
        assert sent[2]["tool_calls"] == [
            {
                "id": "call-1",
                "type": "function",
                "function": {"name": "memory_access", "arguments": '{"action": "get", "key": "team"}'},
            }
        ]
        assert sent[3] == {"role": "tool", "tool_call_id": "call-1", "content": "blue"}


async def test_parallel_tool_results_sent_together(api: Api) -> None:
    calls = (ToolCall("a", "memory_access", {"key": "x"}), ToolCall("b", "memory_access", {"key": "y"}))
    transcript = (
        ChatMessage("user", "both?"),
        ChatMessage("assistant", "", tool_calls=calls),
        ChatMessage("tool", "x=1", tool_call_id="a"),
        ChatMessage("tool", "no such key", tool_call_id="b", is_error=True),
        ChatMessage("user", "and then?"),
    )

    response = await api.provider().complete(ModelRequest("test-model", "sys", transcript, tools=(MEMORY,)))

    assert response.text == "echo: and then?"  # the stand-in accepted the transcript
    sent = api.fake.requests[0]["messages"]
    if api.kind == "anthropic":
        assert [m["role"] for m in sent] == ["user", "assistant", "user"]
        assert sent[2]["content"] == [
            {"type": "tool_result", "tool_use_id": "a", "content": "x=1"},
            {"type": "tool_result", "tool_use_id": "b", "content": "no such key", "is_error": True},
            {"type": "text", "text": "and then?"},
        ]
    else:
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "user"]
        assert sent[2]["content"] is None
        assert sent[4] == {"role": "tool", "tool_call_id": "b", "content": "Error: no such key"}


async def test_several_streamed_tool_calls_keep_their_order(api: Api) -> None:
    api.fake.script(
        Reply(
            tool_calls=[
                Call("memory_access", {"key": "one"}),
                Call("memory_access", {"key": "two", "n": [1, 2]}),
            ]
        )
    )

    response = await api.provider().complete(ask("go", tools=(MEMORY,)))

    assert [c.arguments for c in response.tool_calls] == [{"key": "one"}, {"key": "two", "n": [1, 2]}]
    assert len({c.id for c in response.tool_calls}) == 2
    assert response.text == ""


@pytest.mark.parametrize("raw", ['{"key": "unterminated', "[1, 2]"])
async def test_unparseable_tool_arguments_are_passed_on(api: Api, raw: str) -> None:
    api.fake.script(Reply(tool_calls=[Call("memory_access", raw)]))

    response = await api.provider().complete(ask("go", tools=(MEMORY,)))

    assert response.tool_calls[0].name == "memory_access"
    assert response.tool_calls[0].arguments == {"__invalid_json__": raw}


async def test_calls_run_concurrently_on_one_provider(api: Api) -> None:
    provider = api.provider()

    replies = await asyncio.gather(*(provider.complete(ask(f"n{i}")) for i in range(4)))

    assert sorted(r.text for r in replies) == ["echo: n0", "echo: n1", "echo: n2", "echo: n3"]


async def test_missing_api_key(api: Api) -> None:
    provider = api.provider(api_key=None)

    if api.kind == "anthropic":
        with pytest.raises(ProviderError) as caught:
            await provider.complete(ask("hi"))
        assert caught.value.transient is False
        assert "providers.main.api_key" in str(caught.value)
        assert api.fake.requests == []
    else:
        # Local OpenAI-compatible servers need no key; the SDK still sends one.
        assert (await provider.complete(ask("hi"))).text == "echo: hi"
        assert api.fake.headers[0]["authorization"] == "Bearer none"
