"""Transcript conversion edge cases the round-trip tests do not reach."""

from __future__ import annotations

from gateway.runtime.model import ChatMessage, ToolCall
from gateway.runtime.providers.anthropic_provider import to_anthropic_messages
from gateway.runtime.providers.openai_provider import to_openai_messages
from gateway.runtime.providers.tool_arguments import parse_tool_arguments


def test_anthropic_drops_blank_text_and_merges_same_role() -> None:
    messages = to_anthropic_messages(
        [
            ChatMessage("user", "one"),
            ChatMessage("user", "   "),
            ChatMessage("user", "two"),
            ChatMessage("assistant", ""),
            ChatMessage("assistant", "three"),
        ]
    )

    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "three"}]},
    ]


def test_anthropic_empty_tool_result_has_no_content_key() -> None:
    calls = (ToolCall("t1", "noop", {}),)
    messages = to_anthropic_messages(
        [
            ChatMessage("user", "go"),
            ChatMessage("assistant", tool_calls=calls),
            ChatMessage("tool", "", tool_call_id="t1"),
        ]
    )

    assert messages[1]["content"] == [{"type": "tool_use", "id": "t1", "name": "noop", "input": {}}]
    assert messages[2]["content"] == [{"type": "tool_result", "tool_use_id": "t1"}]


def test_openai_without_system_prompt_skips_empty_assistant() -> None:
    messages = to_openai_messages(
        "", [ChatMessage("user", "hi"), ChatMessage("assistant", ""), ChatMessage("user", "again")]
    )

    assert messages == [{"role": "user", "content": "hi"}, {"role": "user", "content": "again"}]


def test_tool_arguments() -> None:
    assert parse_tool_arguments("") == {}
    assert parse_tool_arguments('{"a": 1}') == {"a": 1}
    assert parse_tool_arguments('"text"') == {"__invalid_json__": '"text"'}
    assert parse_tool_arguments("{oops") == {"__invalid_json__": "{oops"}
