"""JSON written by a model (tool arguments, a sub-agent's structured output) is bounded:
deep nesting is an error the turn can act on, never a RecursionError."""

from __future__ import annotations

import pytest

from gateway.runtime.providers.tool_arguments import INVALID_JSON_KEY, parse_tool_arguments
from gateway.subagents.output import OutputError, extract_json

DEEP = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"


def test_deeply_nested_tool_arguments_come_back_as_invalid_json() -> None:
    assert parse_tool_arguments(DEEP) == {INVALID_JSON_KEY: DEEP}


def test_ordinary_tool_arguments_still_parse() -> None:
    assert parse_tool_arguments('{"path": "/workspace/a.txt", "n": [1, [2]]}') == {
        "path": "/workspace/a.txt",
        "n": [1, [2]],
    }


def test_a_deeply_nested_structured_output_is_an_output_error() -> None:
    with pytest.raises(OutputError, match="nested deeper"):
        extract_json(DEEP)
