"""Checking a host-tool call's arguments against the tool's JSON schema.

The bridge validates before the handler runs, so a handler only ever sees arguments of
the declared shape. Messages name the argument and what to send instead ("channelId is
required", "action must be one of create, update"), never the rejected value: they
reach the model and the audit log, and a value may hold something secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

__all__ = ["ArgumentChecker"]

_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
    "array": "an array",
    "null": "null",
}
_MAX_PROBLEMS = 3


class ArgumentChecker:
    """A compiled validator for one tool's ``input_schema``.

    Args:
        tool_name (:obj:`str`): The tool's MCP name, used in messages.
        schema (Mapping[:obj:`str`, Any]): The tool's JSON schema (an object schema).

    Raises:
        :exc:`jsonschema.exceptions.SchemaError`: The schema itself is invalid.
    """

    __slots__ = ("_properties", "_tool", "_validator")

    def __init__(self, tool_name: str, schema: Mapping[str, Any]):
        Draft202012Validator.check_schema(schema)
        self._tool = tool_name
        self._validator = Draft202012Validator(schema)
        self._properties = sorted((schema.get("properties") or {}).keys())

    def problem(self, args: Any) -> str | None:
        """Describe what is wrong with ``args``.

        Returns:
            :obj:`str` | :obj:`None`: ``None`` when the arguments fit the schema, otherwise
            up to three problems joined by ``"; "``.
        """
        if not isinstance(args, dict):
            return f"{self._tool} takes its arguments as a JSON object"
        errors = sorted(self._validator.iter_errors(args), key=_error_order)
        if not errors:
            return None
        problems: list[str] = []
        seen: set[str] = set()
        for error in errors:
            where = _path(error)
            if where and where in seen:
                continue  # one problem per argument: "must be a string" makes "one of" moot
            seen.add(where)
            text = self._describe(error)
            if text not in problems:
                problems.append(text)
            if len(problems) == _MAX_PROBLEMS:
                break
        return "; ".join(problems)

    def _describe(self, error: ValidationError) -> str:
        where = _path(error)
        kind, expected = error.validator, error.validator_value
        if kind == "required":
            missing = [
                name for name in expected if isinstance(error.instance, dict) and name not in error.instance
            ]
            name = missing[0] if missing else "an argument"
            return f"{_join(where, name)} is required"
        if kind == "additionalProperties":
            extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
            allowed = sorted(error.schema.get("properties", {})) if where else self._properties
            names = ", ".join(repr(e) for e in extra)
            return f"unknown argument {names}{' in ' + where if where else ''}; allowed: {', '.join(allowed)}"
        subject = where or "the arguments"
        if kind == "enum":
            return f"{subject} must be one of {', '.join(str(v) for v in expected)}"
        if kind == "const":
            return f"{subject} must be {expected!r}"
        if kind == "type":
            kinds = expected if isinstance(expected, list) else [expected]
            return f"{subject} must be {' or '.join(_TYPE_WORDS.get(k, k) for k in kinds)}"
        if kind in ("minimum", "exclusiveMinimum"):
            return f"{subject} must be {'at least' if kind == 'minimum' else 'greater than'} {expected}"
        if kind in ("maximum", "exclusiveMaximum"):
            return f"{subject} must be {'at most' if kind == 'maximum' else 'less than'} {expected}"
        if kind == "minLength":
            return (
                f"{subject} must not be empty"
                if expected == 1
                else f"{subject} needs at least {expected} characters"
            )
        if kind == "maxLength":
            return f"{subject} must be at most {expected} characters"
        if kind == "minItems":
            return f"{subject} needs at least {expected} items"
        if kind == "maxItems":
            return f"{subject} takes at most {expected} items"
        if kind == "pattern":
            return f"{subject} must match the pattern {expected}"
        return f"{subject} does not fit the schema ({kind})"


def _path(error: ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _error_order(error: ValidationError) -> tuple[int, int, str]:
    # Missing and unknown arguments first: fixing them often resolves the rest.
    rank = {"required": 0, "additionalProperties": 1, "type": 2}.get(str(error.validator), 3)
    return (rank, len(error.absolute_path), _path(error))
