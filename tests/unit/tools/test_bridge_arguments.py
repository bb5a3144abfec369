"""Argument checking: the verdict is always the JSON Schema one, and messages name what to fix."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tools import registry
from tools.arguments import ArgumentChecker

# Schemas beyond the registry's: every keyword the quick check knows, and some it does not.
EXTRA_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 10},
            "x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1.5},
            "s": {"type": "string", "minLength": 2, "maxLength": 3},
            "either": {"type": ["string", "null"]},
            "mixed": {"enum": ["a", 1, None]},
            "any": {},
        },
        "required": ["n"],
    },
    {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
        "additionalProperties": {"type": "integer"},
    },
    {"type": "object", "patternProperties": {"^a": {"type": "string"}}},
]

CANDIDATES: list[Any] = [
    None, True, False, 0, 1, -1, 0.5, 1.0, float("nan"), float("inf"),
    "", "a", "abcd", "é", [], ["a"], [1], {}, {"a": "b"}, {"a": 1},
]  # fmt: skip


def candidates(schema: dict[str, Any]) -> list[Any]:
    """Edge values for one argument: the common ones, its enum, and either side of its bounds."""
    out = [*CANDIDATES, *schema.get("enum", [])]
    for keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if keyword in schema:
            bound = schema[keyword]
            out += [bound, bound - 1, bound + 1, bound - 0.5, bound + 0.5]
    for keyword in ("minLength", "maxLength"):
        if keyword in schema:
            out += ["x" * max(0, schema[keyword] + d) for d in (-1, 0, 1)]
    return out


def argument_sets(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Arguments that fit except in one place: each argument (required, optional or unknown)
    tried with every candidate value, and each required argument left out."""
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    base = {}
    for name in required:
        sub = properties.get(name, {})
        values = candidates(sub)
        base[name] = next((v for v in values if Draft202012Validator(sub).is_valid(v)), values[0])
    out = [base, *({k: v for k, v in base.items() if k != name} for name in required)]
    for name in [*properties, "unknown"]:
        out += [{**base, name: value} for value in candidates(properties.get(name, {}))]
    return out


@pytest.mark.parametrize("schema", [tool.input_schema for tool in registry.all_tools()] + EXTRA_SCHEMAS)
def test_arguments_pass_exactly_when_the_schema_accepts_them(schema: dict[str, Any]) -> None:
    checker, reference = ArgumentChecker("tool", schema), Draft202012Validator(schema)
    disagreements = [
        args for args in argument_sets(schema) if (checker.problem(args) is None) != reference.is_valid(args)
    ]
    assert disagreements == []


def test_problems_name_the_argument_and_what_to_send() -> None:
    tool = registry.by_mcp_name("memory_access")
    assert tool is not None
    checker = ArgumentChecker(tool.mcp_name, tool.input_schema)
    assert checker.problem({"operation": "read", "key": "k"}) is None
    assert checker.problem({"key": "k"}) == "operation is required"
    assert checker.problem({"operation": "explode"}) == "operation must be one of read, write, delete, list"
    assert checker.problem({"operation": "read", "key": 5}) == "key must be a string"
    assert checker.problem({"operation": "read", "secret": "hunter2"}) == (
        "unknown argument 'secret'; allowed: key, namespace, operation, value"
    )
    assert checker.problem(["read"]) == "memory_access takes its arguments as a JSON object"
